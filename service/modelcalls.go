package service

import (
	"encoding/json"

	"github.com/artifactd/artifactd/hashing"
)

// Recorded model calls. A client records one call to a model as a
// model_call artifact whose id is ModelCallID(request hash) and whose data
// holds the request, its hash and the response:
//
//	{"model": "…", "request_hash": "sha256:…",
//	 "request": {"model", "parameters"?, "messages"?, "tools"?},
//	 "response": …}
//
// The request hash is SHA-256 of the RFC 8785 canonical JSON of the request
// object exactly as recorded (no defaults are added). A replaying client
// asks GET /v1/contexts/{ctx}/model-calls/{request_hash} and answers from
// the record instead of calling the model.

// ModelCallIDPrefix starts the id of every recorded model call.
const ModelCallIDPrefix = "model_call:"

// ModelCallID is the artifact id of the model call whose request hashes to
// requestHash.
func ModelCallID(requestHash hashing.Digest) string { return ModelCallIDPrefix + requestHash.Hex() }

// ModelCallRequestHash returns the request hash of a model request: SHA-256
// of its canonical JSON. The request must be a JSON object.
func ModelCallRequestHash(request json.RawMessage) (hashing.Digest, error) {
	canon, err := hashing.CanonicalizeObject(request)
	if err != nil {
		return hashing.Digest{}, err
	}
	return hashing.Sum(canon), nil
}

// ModelCallView is the body of GET /v1/contexts/{ctx}/model-calls/{hash}.
type ModelCallView struct {
	RequestHash hashing.Digest  `json:"request_hash"`
	Artifact    string          `json:"artifact"`
	Model       string          `json:"model"`
	Request     json.RawMessage `json:"request"`
	Response    json.RawMessage `json:"response"`
	WrittenIn   hashing.Digest  `json:"written_in"`
	Commit      hashing.Digest  `json:"commit"`
}
