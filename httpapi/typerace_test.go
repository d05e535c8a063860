package httpapi

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"sort"
	"strings"
	"sync"
	"testing"

	"github.com/artifactd/artifactd/graph"
	"github.com/artifactd/artifactd/hashing"
	"github.com/artifactd/artifactd/service"
	"github.com/artifactd/artifactd/store"
	"github.com/artifactd/artifactd/store/kv/memkv"
	"github.com/artifactd/artifactd/store/storetest"
)

// typePut is one PUT /v1/types/{name}: role "" leaves the member out.
type typePut struct {
	role, desc, schema string
}

func (p typePut) body() string {
	m := map[string]any{"schema": json.RawMessage(p.schema)}
	if p.role != "" {
		m["role"] = p.role
	}
	if p.desc != "" {
		m["description"] = p.desc
	}
	raw, _ := json.Marshal(m)
	return string(raw)
}

// typeAnswer is what a PUT answered, or what a serial order of the same
// PUTs would have: the status and, on a 2xx, the record's role,
// description, schema hash and version.
type typeAnswer struct {
	status             int
	role, desc, schema string
	version            int
}

func (a typeAnswer) String() string {
	if a.status/100 != 2 {
		return fmt.Sprint(a.status)
	}
	return fmt.Sprintf("%d %s v%d %q %.15s", a.status, a.role, a.version, a.desc, a.schema)
}

// serialTypePuts is what PUT /v1/types/{name} answers, by docs/API.md, to
// puts made one after the other on a type not yet registered, and the
// record it is left with: a create is 201 version 1, derived without a
// role; an update without a role keeps the type's role, one with another
// role is 409 and changes nothing; the same schema and description again
// is 200 and changes nothing; another is 200 and the next version.
func serialTypePuts(t *testing.T, puts []typePut, order []int) ([]typeAnswer, *typeAnswer) {
	t.Helper()
	out := make([]typeAnswer, len(puts))
	var cur *typeAnswer
	for _, i := range order {
		p := puts[i]
		canon, err := hashing.Canonicalize([]byte(p.schema))
		if err != nil {
			t.Fatal(err)
		}
		h := hashing.ContentHash(canon).String()
		role := p.role
		switch {
		case cur == nil:
			if role == "" {
				role = string(graph.RoleDerived)
			}
			cur = &typeAnswer{status: 200, role: role, desc: p.desc, schema: h, version: 1}
			out[i] = *cur
			out[i].status = 201
		case role != "" && role != cur.role:
			out[i] = typeAnswer{status: 409}
		case h == cur.schema && p.desc == cur.desc:
			out[i] = *cur
		default:
			cur = &typeAnswer{status: 200, role: cur.role, desc: p.desc, schema: h, version: cur.version + 1}
			out[i] = *cur
		}
	}
	return out, cur
}

// permutations returns every order of 0..n-1.
func permutations(n int) [][]int {
	if n == 0 {
		return [][]int{{}}
	}
	var out [][]int
	for _, p := range permutations(n - 1) {
		for at := 0; at <= len(p); at++ {
			q := append(append(append([]int{}, p[:at]...), n-1), p[at:]...)
			out = append(out, q)
		}
	}
	return out
}

// answerOf reads a PUT's or a GET's answer.
func answerOf(status int, body []byte) (typeAnswer, error) {
	a := typeAnswer{status: status}
	if status/100 != 2 {
		return a, nil
	}
	var rec service.TypeRecord
	if err := json.Unmarshal(body, &rec); err != nil {
		return a, fmt.Errorf("%d: %v: %s", status, err, body)
	}
	a.role, a.desc, a.schema, a.version = string(rec.Role), rec.Description, rec.SchemaHash.String(), rec.Version
	return a, nil
}

// putRaw sends a PUT of the JSON body to srv at path, as the racing puts
// of these tests do (env.send fails the test, which a goroutine must not).
func putRaw(srv *env, path, body string) (int, []byte, error) {
	hr, err := http.NewRequest("PUT", srv.ts.URL+path, strings.NewReader(body))
	if err != nil {
		return 0, nil, err
	}
	hr.Header.Set("Content-Type", "application/json")
	res, err := srv.ts.Client().Do(hr)
	if err != nil {
		return 0, nil, err
	}
	defer res.Body.Close()
	out, err := io.ReadAll(res.Body)
	return res.StatusCode, out, err
}

// withSharedDriver opens the store over d, a driver other processes write
// too (a database): several envs over one d are several servers on it.
func withSharedDriver(d storetest.Shared) envOption {
	return func(_ *Options, so *store.Options) { so.Dir, so.Driver, so.ReserveBytes = "", d, -1 }
}

// TestConcurrentTypePutsAreSerial: PUTs of one new type at the same time
// answer what one serial order of them answers, and leave the type (in
// the store, in every server's registry and in the definition a context
// records) as that order leaves it. Compatible puts — identical ones, or
// one with a role and one without — therefore all succeed: a put without
// a role takes the role of the type as it finds it (or derived on a
// create), and an identical put is never refused. Puts with different
// roles may be refused 409, but only as a serial order would refuse them
// (all but the first); puts with different schemas or descriptions all
// succeed, each a version. So on one server over its own store, on one
// over a shared database, and on two servers over one database taking
// the puts in turn.
func TestConcurrentTypePutsAreSerial(t *testing.T) {
	t.Run("server", func(t *testing.T) { typeRace(t, 20, newEnv(t)) })
	// A registry over a shared store read the whole registry again on
	// each put, and could put back a snapshot read before another put's
	// write; and two servers each decided on their own registry and
	// wrote over each other: two 201s, or a put without a role that
	// created the type derived over the source type another server had
	// just answered 201 for.
	t.Run("shared", func(t *testing.T) {
		typeRace(t, 12, newEnv(t, withSharedDriver(storetest.Shared{LockingDriver: memkv.New()})))
	})
	t.Run("two-servers", func(t *testing.T) {
		d := storetest.Shared{LockingDriver: memkv.New()}
		typeRace(t, 12, newEnv(t, withSharedDriver(d)), newEnv(t, withSharedDriver(d)))
	})
}

// typeRace runs the puts of each case at the same time, put i on
// servers[i%len(servers)], for a new type each of rounds, and checks
// every round against the serial orders of its puts.
func typeRace(t *testing.T, rounds int, servers ...*env) {
	const s1, s2 = `{"type":"object"}`, `{"type":"object","properties":{"a":{"type":"string"}}}`
	cases := []struct {
		name string
		puts []typePut
	}{
		{"same", []typePut{{"source", "", s1}, {"source", "", s1}}},
		{"same4", []typePut{{"never", "d", s2}, {"never", "d", s2}, {"never", "d", s2}, {"never", "d", s2}}},
		{"same-norole", []typePut{{"", "", s1}, {"", "", s1}, {"", "", s1}}},
		{"role-norole", []typePut{{"source", "", s1}, {"", "", s1}}},
		{"norole-role", []typePut{{"", "", s1}, {"never", "", s1}, {"", "", s1}}},
		{"role-norole-schema", []typePut{{"source", "", s1}, {"", "", s2}}},
		// Controls: a serial order refuses all but the first role ...
		{"roles", []typePut{{"source", "", s1}, {"never", "", s1}, {"derived", "", s1}}},
		// ... and takes every schema or description, each a version.
		{"schemas", []typePut{{"source", "", s1}, {"source", "", s2}}},
		{"descs-norole", []typePut{{"", "one", s1}, {"", "two", s1}, {"", "three", s1}}},
	}
	e := servers[0]
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			e.createContext(c.name, "observe")
			orders := permutations(len(c.puts))
			outcomes := map[string]int{}
			bad := 0
			for round := range rounds {
				name := fmt.Sprintf("r-%s-%d", c.name, round)
				got := make([]typeAnswer, len(c.puts))
				bodies := make([][]byte, len(c.puts))
				errs := make([]error, len(c.puts))
				start := make(chan struct{})
				var wg sync.WaitGroup
				for i, p := range c.puts {
					wg.Go(func() {
						<-start
						status, body, err := putRaw(servers[i%len(servers)], "/v1/types/"+name, p.body())
						if err == nil {
							got[i], err = answerOf(status, body)
						}
						bodies[i], errs[i] = body, err
					})
				}
				close(start)
				wg.Wait()
				for i, err := range errs {
					if err != nil {
						t.Fatalf("round %d put %d: %v", round, i, err)
					}
					if got[i].status == 409 && !strings.Contains(string(bodies[i]), `"immutable"`) {
						t.Errorf("round %d put %d: a 409 that is not a role change: %s", round, i, bodies[i])
					}
				}
				// The record the store holds.
				raw, err := e.st.GetType(context.Background(), name)
				if err != nil {
					t.Fatalf("round %d: %v", round, err)
				}
				final, err := answerOf(200, raw)
				if err != nil {
					t.Fatal(err)
				}
				// Every server records it as the type's definition when
				// it next writes an artifact of the type (it reads the
				// registry again when another server changed it), and
				// answers it when asked after.
				var def map[string]any
				for i, srv := range servers {
					path := "/v1/contexts/" + c.name + "/artifacts"
					srv.must(srv.post(path, map[string]any{"id": fmt.Sprintf("a%d-%s", i, name), "type": name, "data": map[string]any{}}), 201)
					d := srv.must(srv.get(path+"/"+url.PathEscape(graph.TypeDefID(name))), 200)
					if def != nil && d["content_hash"] != def["content_hash"] {
						t.Errorf("round %d: server %d records the definition %v, server 0 %v", round, i, d["content_hash"], def["content_hash"])
					}
					def = d
					r := srv.get("/v1/types/" + name)
					if a, err := answerOf(r.status, r.body); err != nil || a != final {
						t.Errorf("round %d: server %d answers %v (%v), the store holds %v", round, i, a, err, final)
					}
				}

				var key []string
				for _, a := range got {
					key = append(key, fmt.Sprint(a.status))
				}
				sort.Strings(key)
				outcomes[strings.Join(key, ",")]++

				serial := false
				for _, o := range orders {
					want, wantFinal := serialTypePuts(t, c.puts, o)
					if fmt.Sprint(want) != fmt.Sprint(got) || *wantFinal != final {
						continue
					}
					var schema json.RawMessage
					for _, p := range c.puts {
						if canon, _ := hashing.Canonicalize([]byte(p.schema)); hashing.ContentHash(canon).String() == wantFinal.schema {
							schema = canon
						}
					}
					data, err := graph.TypeDef{Name: name, Role: graph.Role(wantFinal.role), Description: wantFinal.desc, Schema: schema}.Data()
					if err != nil {
						t.Fatal(err)
					}
					if h := hashing.ContentHash(data).String(); def["content_hash"] != h {
						t.Errorf("round %d: recorded definition %v, want the content hash of %s (%s)", round, def["content_hash"], data, h)
					}
					serial = true
					break
				}
				if !serial {
					bad++
					if bad <= 3 {
						t.Errorf("round %d: the puts %v answered %v and left %v: no serial order of them does that", round, c.puts, got, final)
					}
				}
			}
			t.Logf("%d rounds of %d puts on %d server(s): outcomes %v; %d not serial", rounds, len(c.puts), len(servers), outcomes, bad)
			if bad > 0 {
				t.Errorf("%d of %d rounds answered what no serial order of the same puts answers", bad, rounds)
			}
		})
	}
}
