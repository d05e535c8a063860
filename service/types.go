package service

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/artifactd/artifactd/fault"

	"github.com/santhosh-tekuri/jsonschema/v6"
	"github.com/santhosh-tekuri/jsonschema/v6/kind"
	"golang.org/x/text/language"
	"golang.org/x/text/message"

	"github.com/artifactd/artifactd/graph"
	"github.com/artifactd/artifactd/hashing"
	"github.com/artifactd/artifactd/schema"
	"github.com/artifactd/artifactd/store"
)

// TypeFetchVerdict is the reserved type only the gate writes.
const TypeFetchVerdict = "fetch_verdict"

// TypeRecord is a registered artifact type as GET /v1/types/{name} shows
// it and as the store keeps it (store.PutType, opaque to the store).
type TypeRecord struct {
	Name        string     `json:"name"`
	Version     int        `json:"version"`
	Role        graph.Role `json:"role"`
	Description string     `json:"description,omitempty"`
	// Schema is the canonical JSON of the type's JSON Schema (draft
	// 2020-12) for an artifact's data.
	Schema     json.RawMessage `json:"schema"`
	SchemaHash hashing.Digest  `json:"schema_hash"`
	Builtin    bool            `json:"builtin"`
	Reserved   bool            `json:"reserved,omitempty"`
}

type typeEntry struct {
	rec    TypeRecord
	schema *jsonschema.Schema
	// fast is the schema's check without the library's cost per value,
	// when it has one (schema.Fast): a commit's thousands of payloads go
	// through it, and only a refusal through the library, which explains
	// it.
	fast *schema.Fast
	// refused says why this release refuses the schema a type was stored
	// with (Load): the type keeps its role, and every artifact of it is
	// refused until the type is registered again.
	refused *fault.Error
}

// Registry holds the artifact types: the built-ins of DESIGN.md and the
// user types registered with PUT /v1/types/{name}. A write validates its
// data against it and records the definitions it used in the chain, where
// trust reads each type's role. A user type's role cannot change once registered (trust indexes already
// built from it would go stale); its schema and description can, each
// change bumping the version. Methods are safe for concurrent use.
type Registry struct {
	builtin map[string]*typeEntry // immutable after NewRegistry

	builtinRels map[string]RelationRecord // immutable after NewRegistry

	mu sync.RWMutex // guards user, userRels and stamp
	// putMu, a lock of one slot (lockPut), serializes Put, PutRelation
	// and Load: a put decides, writes and installs its record while no
	// other put of this registry reads the type or relation, and a load
	// never installs a snapshot read before a put's write over the
	// record that put installed. A caller waiting for it stops with its
	// context.
	putMu    chan struct{}
	user     map[string]*typeEntry
	userRels map[string]RelationRecord
	// stamp is the store's registry stamp Load read (Refresh).
	stamp  []byte
	loaded atomic.Bool
}

// NewRegistry returns a registry holding the built-in types. It panics if a
// built-in schema does not compile, which TestSchemasCompile rules out.
func NewRegistry() *Registry {
	r := &Registry{builtin: map[string]*typeEntry{}, user: map[string]*typeEntry{},
		builtinRels: builtinRelations(), userRels: map[string]RelationRecord{}, putMu: make(chan struct{}, 1)}
	for _, name := range graph.BuiltinTypes() {
		def, ok := builtinSchemas[name]
		if !ok {
			panic("service: no schema for built-in type " + name)
		}
		role, _ := graph.BuiltinRoles(name)
		e, err := newTypeEntry(name, role, def.description, []byte(def.schema))
		if err != nil {
			panic(fmt.Sprintf("service: built-in type %s: %v", name, err))
		}
		e.rec.Version, e.rec.Builtin, e.rec.Reserved = 1, true, name == TypeFetchVerdict
		r.builtin[name] = e
	}
	return r
}

// RoleOf returns the trust role of a type: built-in roles first, then
// registered user types.
func (r *Registry) RoleOf(typ string) (graph.Role, bool) {
	if role, ok := graph.BuiltinRoles(typ); ok {
		return role, true
	}
	r.mu.RLock()
	e := r.user[typ]
	r.mu.RUnlock()
	if e == nil {
		return "", false
	}
	return e.rec.Role, true
}

// Load reads the user types stored in st. Call it after store.Open and
// before serving, so that trust sees every user type's role.
func (r *Registry) Load(ctx context.Context, st *store.Store) error {
	if err := r.lockPut(ctx); err != nil {
		return fmt.Errorf("load types: %w", err)
	}
	defer r.unlockPut()
	return r.load(ctx, st)
}

// lockPut takes the registry's put lock (putMu), or returns ctx's error
// when ctx ends first.
func (r *Registry) lockPut(ctx context.Context) error {
	select {
	case r.putMu <- struct{}{}:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// unlockPut lets go of the put lock lockPut took.
func (r *Registry) unlockPut() { <-r.putMu }

// load is Load with the put lock held.
func (r *Registry) load(ctx context.Context, st *store.Store) error {
	stamp, err := st.RegistryStamp(ctx)
	if err != nil {
		return fmt.Errorf("load types: %w", err)
	}
	recs, err := st.ListTypes(ctx)
	if err != nil {
		return fmt.Errorf("load types: %w", err)
	}
	user := make(map[string]*typeEntry, len(recs))
	for name, raw := range recs {
		var rec TypeRecord
		if err := json.Unmarshal(raw, &rec); err != nil {
			return fmt.Errorf("load type %q: %w", name, err)
		}
		e, err := storedTypeEntry(name, rec)
		if err != nil {
			return fmt.Errorf("load type %q: %w", name, err)
		}
		e.rec.Version = rec.Version
		user[name] = e
	}
	rawRels, err := st.ListRelations(ctx)
	if err != nil {
		return fmt.Errorf("load relations: %w", err)
	}
	rels := make(map[string]RelationRecord, len(rawRels))
	for name, raw := range rawRels {
		var rec RelationRecord
		if err := json.Unmarshal(raw, &rec); err != nil {
			return fmt.Errorf("load relation %q: %w", name, err)
		}
		rels[name] = rec
	}
	r.mu.Lock()
	r.user = user
	r.userRels = rels
	r.stamp = stamp
	r.mu.Unlock()
	r.loaded.Store(true)
	return nil
}

// storedTypeEntry is the entry of the stored record rec of type name, as
// Load keeps it. A schema this release refuses is not an error: it was
// stored by a release that accepted it (a cost it did not count), so the
// server starts, and the type refuses its artifacts until it is
// registered again.
func storedTypeEntry(name string, rec TypeRecord) (*typeEntry, error) {
	e, err := newTypeEntry(name, rec.Role, rec.Description, rec.Schema)
	var fe *fault.Error
	if errors.As(err, &fe) && fe.Code == fault.InvalidSchema {
		rec.Name = name
		return &typeEntry{rec: rec, refused: fe}, nil
	}
	return e, err
}

// Refresh reads the registry again when another process changed it since
// the last Load (the store's registry stamp moved). Only a store other
// processes write to (store.Store.Shared) can change under a loaded
// registry; for any other it does nothing.
func (r *Registry) Refresh(ctx context.Context, st *store.Store) error {
	if !st.Shared() {
		return nil
	}
	stamp, err := st.RegistryStamp(ctx)
	if err != nil {
		return fmt.Errorf("refresh types: %w", err)
	}
	if r.loadedAt(stamp) {
		return nil
	}
	if err := r.lockPut(ctx); err != nil {
		return fmt.Errorf("refresh types: %w", err)
	}
	defer r.unlockPut()
	// Writers that found the stamp moved wait here together: the first
	// loads, and the others find its load read the stamp they read (a
	// load reads the stamp before the records, so its records are at
	// least that new).
	if r.loadedAt(stamp) {
		return nil
	}
	return r.load(ctx, st)
}

// loadedAt reports whether the registry's last load read stamp.
func (r *Registry) loadedAt(stamp []byte) bool {
	r.mu.RLock()
	defer r.mu.RUnlock()
	return bytes.Equal(stamp, r.stamp)
}

// Refused returns the user types whose stored schema this release
// refuses, each with why: Load keeps them, and their artifacts are
// refused until they are registered again. The server logs them when it
// starts.
func (r *Registry) Refused() map[string]string {
	r.mu.RLock()
	defer r.mu.RUnlock()
	out := map[string]string{}
	for name, e := range r.user {
		if e.refused != nil {
			out[name] = e.refused.Detail
		}
	}
	return out
}

// Loaded reports whether Load has succeeded.
func (r *Registry) Loaded() bool { return r.loaded.Load() }

func (r *Registry) entry(name string) *typeEntry {
	if e := r.builtin[name]; e != nil {
		return e
	}
	r.mu.RLock()
	defer r.mu.RUnlock()
	return r.user[name]
}

// Get returns a type's record.
func (r *Registry) Get(name string) (TypeRecord, bool) {
	if e := r.entry(name); e != nil {
		return e.rec, true
	}
	return TypeRecord{}, false
}

// List returns every type, sorted by name.
func (r *Registry) List() []TypeRecord {
	out := make([]TypeRecord, 0, len(r.builtin))
	for _, e := range r.builtin {
		out = append(out, e.rec)
	}
	r.mu.RLock()
	for _, e := range r.user {
		out = append(out, e.rec)
	}
	r.mu.RUnlock()
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// Put registers or updates a user type and stores its record. schema must
// be canonical JSON. An empty role keeps the role of a registered type and
// is derived for a new one; another role than the registered one is a
// conflict. It returns the record and whether anything changed.
//
// Puts of one type at the same time, in this process or in several on one
// database, answer and leave what one serial order of them would: each
// decides against the type's record as the store holds it and writes only
// if that record is still there (store.Store.PutTypeIf), deciding again
// when another put got in first. So an empty role takes the role of the
// type as the put finds it, and identical puts are never refused.
func (r *Registry) Put(ctx context.Context, st *store.Store, name string, role graph.Role, description string, schema []byte) (TypeRecord, bool, error) {
	if err := graph.ValidateName("type", name); err != nil {
		return TypeRecord{}, false, &fault.Error{Code: fault.Invalid, Detail: err.Error(),
			Errors: []fault.FieldError{{Parameter: "name", Rule: "pattern", Detail: err.Error()}}}
	}
	if graph.IsDefinitionType(name) {
		// The chain records definitions as artifacts of these types and
		// refuses every other artifact of them.
		detail := fmt.Sprintf("%q is reserved for the definitions a context records; choose another type name", name)
		return TypeRecord{}, false, &fault.Error{Code: fault.ReservedType, Detail: detail,
			Errors: []fault.FieldError{{Parameter: "name", Rule: "reserved", Detail: detail}}}
	}
	if _, ok := r.builtin[name]; ok {
		code, rule := fault.Conflict, "builtin"
		if name == TypeFetchVerdict {
			code, rule = fault.ReservedType, "reserved"
		}
		detail := fmt.Sprintf("%q is a built-in type and cannot be redefined", name)
		return TypeRecord{}, false, &fault.Error{Code: code, Detail: detail,
			Errors: []fault.FieldError{{Parameter: "name", Rule: rule, Detail: detail}}}
	}
	// The schema and a given role are checked before the type is read:
	// an empty role is resolved against the record the put decides on,
	// and compiled as derived meanwhile (a role does not change how the
	// schema compiles).
	e, err := newTypeEntry(name, cmp.Or(role, graph.RoleDerived), description, schema)
	if err != nil {
		return TypeRecord{}, false, err
	}
	wrote, err := r.putRecord(ctx, "type", name, st.GetType, st.PutTypeIf, func(oldRaw []byte) ([]byte, error) {
		var old *TypeRecord
		if oldRaw != nil {
			old = new(TypeRecord)
			if err := json.Unmarshal(oldRaw, old); err != nil {
				return nil, fmt.Errorf("stored type %q: %w", name, err)
			}
			// The hash of the stored schema as Load computes it.
			if canon, err := hashing.Canonicalize(old.Schema); err == nil {
				old.SchemaHash = hashing.ContentHash(canon)
			}
		}
		e.rec.Role = role
		if role == "" { // an update keeps the role (which cannot change), a create is derived
			e.rec.Role = graph.RoleDerived
			if old != nil {
				e.rec.Role = old.Role
			}
		}
		switch {
		case old == nil:
			e.rec.Version = 1
		case old.Role != e.rec.Role:
			return nil, &fault.Error{Code: fault.Conflict,
				Detail: fmt.Sprintf("type %q has role %q; a role cannot change once registered (trust already rests on it): register a new type name instead", name, old.Role),
				Errors: []fault.FieldError{{Pointer: "/role", Rule: "immutable", Detail: "role cannot change"}}}
		case old.SchemaHash == e.rec.SchemaHash && old.Description == description:
			e.rec.Version = old.Version
			return nil, nil
		default:
			e.rec.Version = old.Version + 1
		}
		return json.Marshal(e.rec)
	})
	if err != nil {
		return TypeRecord{}, false, err
	}
	r.install(name, e)
	return e.rec, wrote, nil
}

// putRecord is a put of the registry record of type or relation name
// (kind says which): under the put lock it reads the stored record (get;
// nil when there is none), lets decide say what to write over it — nil
// when the put changes nothing, or its refusal — and writes that only if
// the stored record is still the one it read (putIf), reading and
// deciding again when another writer got in first (contended). It
// reports whether it wrote.
func (r *Registry) putRecord(ctx context.Context, kind, name string,
	get func(ctx context.Context, name string) ([]byte, error),
	putIf func(ctx context.Context, name string, old, record []byte) error,
	decide func(old []byte) ([]byte, error)) (bool, error) {
	if err := r.lockPut(ctx); err != nil {
		return false, err
	}
	defer r.unlockPut()
	for tries := 0; ; tries++ {
		// The store's record, not the registry's: another process may
		// have changed it (the version follows the store's).
		old, err := get(ctx, name)
		if errors.Is(err, store.ErrNotFound) {
			old, err = nil, nil
		}
		if err != nil {
			return false, err
		}
		raw, err := decide(old)
		if err != nil || raw == nil {
			return false, err
		}
		err = putIf(ctx, name, old, raw)
		if !errors.Is(err, store.ErrStale) {
			return err == nil, err
		}
		// Another process changed the record first: decide again.
		if err := contended(ctx, kind, name, tries); err != nil {
			return false, err
		}
	}
}

// registryTries bounds how many times a put of a type or relation decides
// again after another process changed the record between its read and
// its write.
const registryTries = 64

// contended is what a put of the type or relation name (what) does after
// losing the record to another writer for the tries-th time (from 0):
// nil after a pause of up to tries milliseconds, at random, so that
// writers racing on one record spread out; ctx's error when it ends
// meanwhile; a 409 once registryTries puts in a row lost.
func contended(ctx context.Context, what, name string, tries int) error {
	if tries+1 >= registryTries {
		detail := fmt.Sprintf("%s %q changed under this put %d times in a row: other processes keep writing it; send the put again", what, name, registryTries)
		return &fault.Error{Code: fault.Conflict, Detail: detail,
			Errors: []fault.FieldError{{Parameter: "name", Rule: "contended", Detail: detail}}}
	}
	t := time.NewTimer(time.Duration(rand.IntN(tries+1)) * time.Millisecond)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// install makes e, the record the store holds, the registry's entry of
// user type name.
func (r *Registry) install(name string, e *typeEntry) {
	r.mu.Lock()
	r.user[name] = e
	r.mu.Unlock()
}

// newTypeEntry checks and compiles a type's schema.
func newTypeEntry(name string, role graph.Role, description string, src []byte) (*typeEntry, error) {
	switch role {
	case graph.RoleSource, graph.RoleDerived, graph.RoleNever:
	case graph.RoleFetchVerdict:
		if name != TypeFetchVerdict {
			return nil, &fault.Error{Code: fault.Invalid, Detail: "the fetch_verdict role is reserved for the gate's fetch_verdict type",
				Errors: []fault.FieldError{{Pointer: "/role", Rule: "enum", Detail: "want source, derived or never"}}}
		}
	default:
		return nil, &fault.Error{Code: fault.Invalid, Detail: fmt.Sprintf("unknown role %q", role),
			Errors: []fault.FieldError{{Pointer: "/role", Rule: "enum", Detail: "want source, derived or never"}}}
	}
	canon, err := hashing.Canonicalize(src)
	if err != nil {
		return nil, err
	}
	doc, err := hashing.DecodeCanonical(canon)
	if err != nil {
		return nil, err
	}
	if ce := schema.CheckCost(doc); ce != nil {
		return nil, &fault.Error{Code: fault.InvalidSchema, Detail: ce.Detail,
			Errors: []fault.FieldError{{Pointer: "/schema" + ce.Pointer, Rule: ce.Rule, Detail: ce.Detail}}}
	}
	sch, err := CompileSchema(name, doc)
	if err != nil {
		return nil, err
	}
	return &typeEntry{
		rec:    TypeRecord{Name: name, Role: role, Description: description, Schema: canon, SchemaHash: hashing.ContentHash(canon)},
		schema: sch,
		fast:   schema.CompileFast(doc),
	}, nil
}

// CompileSchema compiles a JSON Schema document as draft 2020-12 under the
// name urn:artifactd:schema:NAME. Its errors are invalid-schema
// *fault.Error values pointing below /schema.
func CompileSchema(name string, doc any) (*jsonschema.Schema, error) {
	if schema.OtherDialect(doc) {
		return nil, &fault.Error{Code: fault.InvalidSchema, Detail: fmt.Sprintf("$schema must be %s (draft 2020-12)", SchemaDialect),
			Errors: []fault.FieldError{{Pointer: "/schema/$schema", Rule: "draft", Detail: "only draft 2020-12 is supported"}}}
	}
	c := schema.NewCompiler()
	loc := "urn:artifactd:schema:" + name
	if err := c.AddResource(loc, doc); err != nil {
		return nil, &fault.Error{Code: fault.InvalidSchema, Detail: err.Error(), Errors: []fault.FieldError{{Pointer: "/schema", Rule: "schema", Detail: err.Error()}}}
	}
	sch, err := c.Compile(loc)
	if err != nil {
		var sve *jsonschema.SchemaValidationError
		var ve *jsonschema.ValidationError
		if errors.As(err, &sve) && errors.As(sve.Err, &ve) {
			// Not valid against the draft 2020-12 metaschema: point at
			// each offending keyword.
			var out []fault.FieldError
			flattenValidation(ve, "/schema", &out)
			return nil, &fault.Error{Code: fault.InvalidSchema, Detail: "the schema is not valid JSON Schema (draft 2020-12)", Errors: out}
		}
		detail := strings.ReplaceAll(err.Error(), loc, "schema")
		return nil, &fault.Error{Code: fault.InvalidSchema, Detail: detail, Errors: []fault.FieldError{{Pointer: "/schema", Rule: "schema", Detail: detail}}}
	}
	return sch, nil
}

// Validate checks data (a generic value with json.Number numbers, as
// hashing.DecodeCanonical and jsonschema.UnmarshalJSON decode JSON)
// against the type's schema; field errors point below prefix.
func (r *Registry) Validate(typ string, data any, prefix string) error {
	return validateEntry(r.entry(typ), typ, data, prefix)
}

// typeUse holds the registry's entries a write validated its puts
// against, by type name (nil for a name it did not know). The definitions
// its commit records are these (definitions), not the registry's a moment
// later: a put of the type in between would otherwise record a
// definition the write's data was never checked against, and history
// would hold data its own definition refuses (an import of the context's
// export refuses it).
type typeUse map[string]*typeEntry

// validateIn is Validate against the entry use holds for typ, taking the
// registry's current one (and keeping it in use) the first time.
func (r *Registry) validateIn(use typeUse, typ string, data any, prefix string) error {
	e, ok := use[typ]
	if !ok {
		e = r.entry(typ)
		use[typ] = e
	}
	return validateEntry(e, typ, data, prefix)
}

// validateEntry validates data against e, the entry of type typ (nil: the
// type is unknown).
func validateEntry(e *typeEntry, typ string, data any, prefix string) error {
	if e == nil {
		return &fault.Error{Code: fault.UnknownType, Detail: fmt.Sprintf("unknown type %q; register it with PUT /v1/types/%s or use a built-in type", typ, typ),
			Errors: []fault.FieldError{{Pointer: parentPointer(prefix) + "/type", Rule: "registered", Detail: "unknown type"}}}
	}
	if e.refused != nil {
		return &fault.Error{Code: fault.InvalidSchema,
			Detail: fmt.Sprintf("type %q (version %d) was stored with a schema this release refuses (%s); register the type again with a schema it accepts", typ, e.rec.Version, e.refused.Detail),
			Errors: []fault.FieldError{{Pointer: parentPointer(prefix) + "/type", Rule: "schema_refused", Detail: "the type's stored schema is refused: " + e.refused.Detail}}}
	}
	if e.fast != nil && e.fast.Valid(data) {
		return nil
	}
	return ValidateAgainst(e.schema, data, prefix, fmt.Sprintf("data does not match the schema of type %q (version %d)", typ, e.rec.Version))
}

var printer = message.NewPrinter(language.English)

// maxFieldErrors caps a validation problem's errors list.
const maxFieldErrors = 50

// ValidateAgainst validates v and turns a failure into a validation
// problem whose pointers start with prefix.
func ValidateAgainst(sch *jsonschema.Schema, v any, prefix, detail string) error {
	err := sch.Validate(v)
	if err == nil {
		return nil
	}
	var ve *jsonschema.ValidationError
	if !errors.As(err, &ve) {
		return &fault.Error{Code: fault.Invalid, Detail: detail}
	}
	var out []fault.FieldError
	flattenValidation(ve, prefix, &out)
	if len(out) > maxFieldErrors {
		out = out[:maxFieldErrors]
	}
	if len(out) == 1 {
		detail += ": " + out[0].Pointer + ": " + out[0].Detail
	}
	return &fault.Error{Code: fault.Invalid, Detail: detail, Errors: out}
}

func flattenValidation(ve *jsonschema.ValidationError, prefix string, out *[]fault.FieldError) {
	if len(*out) > maxFieldErrors {
		return
	}
	if len(ve.Causes) > 0 {
		for _, c := range ve.Causes {
			flattenValidation(c, prefix, out)
		}
		return
	}
	ptr := prefix + pointerOf(ve.InstanceLocation)
	rule := strings.Join(ve.ErrorKind.KeywordPath(), "/")
	switch k := ve.ErrorKind.(type) {
	case *kind.Required:
		for _, m := range k.Missing {
			*out = append(*out, fault.FieldError{Pointer: ptr + "/" + fault.PointerToken(m), Rule: "required", Detail: "missing property " + quoteJSON(m)})
		}
		return
	case *kind.AdditionalProperties:
		for _, p := range k.Properties {
			*out = append(*out, fault.FieldError{Pointer: ptr + "/" + fault.PointerToken(p), Rule: "additionalProperties", Detail: "unknown property " + quoteJSON(p)})
		}
		return
	case *kind.FalseSchema:
		// A schema of false: the value may not be there at all.
		detail := "no value is allowed here"
		if n := len(ve.InstanceLocation); n > 0 {
			detail = "property " + quoteJSON(ve.InstanceLocation[n-1]) + " is not allowed here"
		}
		*out = append(*out, fault.FieldError{Pointer: ptr, Rule: "not_allowed", Detail: detail})
		return
	}
	if rule == "" {
		rule = "schema" // every kind names a keyword but false schemas; keep a rule all the same
	}
	*out = append(*out, fault.FieldError{Pointer: ptr, Rule: rule, Detail: ve.ErrorKind.LocalizedString(printer)})
}

func pointerOf(loc []string) string {
	var b strings.Builder
	for _, p := range loc {
		b.WriteByte('/')
		b.WriteString(fault.PointerToken(p))
	}
	return b.String()
}

// parentPointer drops the last segment of a JSON pointer.
func parentPointer(p string) string {
	if i := strings.LastIndexByte(p, '/'); i >= 0 {
		return p[:i]
	}
	return ""
}

func quoteJSON(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}
