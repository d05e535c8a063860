package httpapi

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"sort"
	"strings"
	"sync"
	"testing"

	"github.com/artifactd/artifactd/hashing"
	"github.com/artifactd/artifactd/store"
	"github.com/artifactd/artifactd/store/kv/memkv"
	"github.com/artifactd/artifactd/store/storetest"
)

// The harness of the registry race tests (TestConcurrentTypePutsAreSerial,
// TestConcurrentRelationPutsAreSerial): PUTs of one new registry record
// sent at the same time must answer, and leave, what one serial order of
// them does. Each test says what a put is, what it answers and what a
// serial order answers (a registryKind); registryRace does the racing and
// the checks.

// raceAnswer is what a racing PUT answered, or what a serial order of the
// same PUTs would have; two answers are equal when they say the same.
type raceAnswer interface {
	comparable
	fmt.Stringer
	// httpStatus is the answer's HTTP status.
	httpStatus() int
}

// registryKind is one kind of registry record that PUTs race on, a type
// or a relation: P is one PUT, A what a PUT answers.
type registryKind[P interface{ body() string }, A raceAnswer] struct {
	// resource is the collection the records live in: PUT and GET
	// /v1/{resource}/{name}.
	resource string
	// refusal names the only change a 409 may refuse, for the message of
	// a 409 that refused something else ("a role change").
	refusal string
	// answerOf reads a PUT's or a GET's answer (status and body).
	answerOf func(status int, body []byte) (A, error)
	// serial is what the puts answer when made one after the other in
	// order, on a record not yet registered, and the record they leave.
	serial func(t *testing.T, puts []P, order []int) ([]A, *A)
	// stored reads the record of name as the store holds it.
	stored func(st *store.Store, ctx context.Context, name string) ([]byte, error)
	// prepare, when set, writes what the artifacts of artifact need in
	// the context (on server e, at path, its artifacts collection) before
	// a case's first round.
	prepare func(e *env, path string)
	// artifact is the body of a POST of artifact id that uses the record
	// name, so that the context records its definition.
	artifact func(id, name string) map[string]any
	// defID is the id of the artifact recording name's definition.
	defID func(name string) string
	// def is the data of the definition a context records for name when
	// the record is final and was put by one of puts.
	def func(name string, final A, puts []P) ([]byte, error)
}

// raceCase is one set of PUTs raced on a new record each round.
type raceCase[P any] struct {
	name string
	puts []P
}

// raceDeployments runs race, the race of one test with its number of
// rounds, on each deployment the registry race tests cover: one server
// over its own store ("server"), one over a shared database ("shared"),
// and two servers over one database taking the puts in turn
// ("two-servers").
func raceDeployments(t *testing.T, race func(t *testing.T, rounds int, servers ...*env)) {
	t.Run("server", func(t *testing.T) { race(t, 20, newEnv(t)) })
	t.Run("shared", func(t *testing.T) {
		race(t, 12, newEnv(t, withSharedDriver(storetest.Shared{LockingDriver: memkv.New()})))
	})
	t.Run("two-servers", func(t *testing.T) {
		d := storetest.Shared{LockingDriver: memkv.New()}
		race(t, 12, newEnv(t, withSharedDriver(d)), newEnv(t, withSharedDriver(d)))
	})
}

// registryRace runs the puts of each case at the same time, put i on
// servers[i%len(servers)], on a new record of kind k in each of rounds,
// and checks every round: no 409 but the kind's refusal; every server
// records the stored record as the definition when it next uses it, and
// answers it when asked; and the answers and the stored record are those
// of a serial order of the puts, whose definition the servers recorded.
func registryRace[P interface{ body() string }, A raceAnswer](t *testing.T, k registryKind[P, A], cases []raceCase[P], rounds int, servers ...*env) {
	e := servers[0]
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			e.createContext(c.name, "observe")
			path := "/v1/contexts/" + c.name + "/artifacts"
			if k.prepare != nil {
				k.prepare(e, path)
			}
			// What each serial order of the puts answers and leaves: the
			// same every round.
			type serialRun struct {
				answers []A
				final   *A
			}
			var serials []serialRun
			for _, o := range permutations(len(c.puts)) {
				want, wantFinal := k.serial(t, c.puts, o)
				serials = append(serials, serialRun{want, wantFinal})
			}
			outcomes := map[string]int{}
			bad := 0
			for round := range rounds {
				name := fmt.Sprintf("r-%s-%d", c.name, round)
				got, bodies, errs := racePuts(servers, "/v1/"+k.resource+"/"+name, c.puts, k.answerOf)
				for i, err := range errs {
					if err != nil {
						t.Fatalf("round %d put %d: %v", round, i, err)
					}
					if got[i].httpStatus() == 409 && !strings.Contains(string(bodies[i]), `"immutable"`) {
						t.Errorf("round %d put %d: a 409 that is not %s: %s", round, i, k.refusal, bodies[i])
					}
				}
				// The record the store holds.
				raw, err := k.stored(e.st, context.Background(), name)
				if err != nil {
					t.Fatalf("round %d: %v", round, err)
				}
				final, err := k.answerOf(200, raw)
				if err != nil {
					t.Fatal(err)
				}
				// Every server records it as the definition when it next
				// writes an artifact that uses it (it reads the registry
				// again when another server changed it), and answers it
				// when asked after.
				var def map[string]any
				for i, srv := range servers {
					srv.must(srv.post(path, k.artifact(fmt.Sprintf("a%d-%s", i, name), name)), 201)
					d := srv.must(srv.get(path+"/"+url.PathEscape(k.defID(name))), 200)
					if def != nil && d["content_hash"] != def["content_hash"] {
						t.Errorf("round %d: server %d records the definition %v, server 0 %v", round, i, d["content_hash"], def["content_hash"])
					}
					def = d
					r := srv.get("/v1/" + k.resource + "/" + name)
					if a, err := k.answerOf(r.status, r.body); err != nil || a != final {
						t.Errorf("round %d: server %d answers %v (%v), the store holds %v", round, i, a, err, final)
					}
				}

				var key []string
				for _, a := range got {
					key = append(key, fmt.Sprint(a.httpStatus()))
				}
				sort.Strings(key)
				outcomes[strings.Join(key, ",")]++

				serial := false
				for _, sr := range serials {
					if fmt.Sprint(sr.answers) != fmt.Sprint(got) || *sr.final != final {
						continue
					}
					data, err := k.def(name, *sr.final, c.puts)
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

// racePuts sends puts to path at the same time, put i to
// servers[i%len(servers)], and returns what each answered (read with
// answerOf), its body, and the error that kept it from an answer.
func racePuts[P interface{ body() string }, A any](servers []*env, path string, puts []P, answerOf func(int, []byte) (A, error)) ([]A, [][]byte, []error) {
	got := make([]A, len(puts))
	bodies := make([][]byte, len(puts))
	errs := make([]error, len(puts))
	start := make(chan struct{})
	var wg sync.WaitGroup
	for i, p := range puts {
		wg.Go(func() {
			<-start
			status, body, err := putRaw(servers[i%len(servers)], path, p.body())
			if err == nil {
				got[i], err = answerOf(status, body)
			}
			bodies[i], errs[i] = body, err
		})
	}
	close(start)
	wg.Wait()
	return got, bodies, errs
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
