package httpapi

import (
	"encoding/json"

	"github.com/artifactd/artifactd/fault"
	"github.com/artifactd/artifactd/hashing"
	"github.com/artifactd/artifactd/service"
)

// The wire types of the API are the service layer's: the door decodes a
// body into one, calls the service and encodes what it answers. These
// names keep the API's Go vocabulary where its users (and the OpenAPI
// document) have it.
type (
	// Error is the error vocabulary (fault.Error).
	Error = fault.Error
	// FieldError is one field of an Error.
	FieldError = fault.FieldError

	ArtifactInput      = service.ArtifactInput      // POST .../artifacts
	EdgeInput          = service.EdgeInput          // an outgoing edge of a write
	ArtifactView       = service.ArtifactView       // an artifact as reads and writes return it
	ArtifactWrite      = service.ArtifactWrite      // the answer to a one-artifact write
	CommitInput        = service.CommitInput        // POST .../commits
	OpInput            = service.OpInput            // one op of a CommitInput
	PutInput           = service.PutInput           // the artifact of a put op
	CommitWrite        = service.CommitWrite        // the answer to a commit
	TaintView          = service.TaintView          // tainted_by of a quarantine refusal
	Fetcher            = service.Fetcher            // a server-side fetch
	Renderer           = service.Renderer           // a browser rendering of a script shell
	FetchInput         = service.FetchInput         // POST .../fetches
	FetchWrite         = service.FetchWrite         // the answer to POST .../fetches
	VerdictData        = service.VerdictData        // a fetch_verdict's data
	RenderedFrom       = service.RenderedFrom       // the script shell behind a rendered verdict
	ToolResultInput    = service.ToolResultInput    // POST .../tool-results
	ToolErrorData      = service.ToolErrorData      // a tool_error's data
	ToolOutputData     = service.ToolOutputData     // a tool_output's data
	ModelCallView      = service.ModelCallView      // GET .../model-calls/{request_hash}
	EffectInput        = service.EffectInput        // POST .../effects
	ClaimInput         = service.ClaimInput         // POST .../effects/claim
	CompleteInput      = service.CompleteInput      // POST .../effects/{id}/complete
	FailInput          = service.FailInput          // POST .../effects/{id}/fail
	EffectData         = service.EffectData         // an effect's data
	EffectView         = service.EffectView         // an effect as the outbox answers it
	EffectWrite        = service.EffectWrite        // the answer to an effect write
	ClaimWrite         = service.ClaimWrite         // the answer to a claim
	TypeRecord         = service.TypeRecord         // GET /v1/types/{name}
	Registry           = service.Registry           // the type and relation registry
	RelationRecord     = service.RelationRecord     // GET /v1/relations/{name}
	VerifyInput        = service.VerifyInput        // POST .../verify
	VerifyResult       = service.VerifyResult       // the answer to verify
	CompareSide        = service.CompareSide        // one side of GET /v1/compare
	Comparison         = service.Comparison         // the answer to GET /v1/compare
	ProducerDivergence = service.ProducerDivergence // a producer's divergences
	ComparedArtifact   = service.ComparedArtifact   // an artifact on one side only
	ChangedArtifact    = service.ChangedArtifact    // an artifact that differs
	ChangedEdge        = service.ChangedEdge        // an edge that differs
	QuarantineReport   = service.QuarantineReport   // GET .../quarantine
	QuarantinedView    = service.QuarantinedView    // one quarantined artifact
	EvalReport         = service.EvalReport         // GET .../eval
)

// Names of the service layer the API's Go users know from here.
const (
	TypeFetchVerdict   = service.TypeFetchVerdict
	TypeEffect         = service.TypeEffect
	TypeToolError      = service.TypeToolError
	TypeToolOutput     = service.TypeToolOutput
	EffectPending      = service.EffectPending
	EffectClaimed      = service.EffectClaimed
	EffectSent         = service.EffectSent
	EffectFailed       = service.EffectFailed
	FetchedByAgent     = service.FetchedByAgent
	FetchedByArtifactd = service.FetchedByArtifactd
	MaxFetchTextChars  = service.MaxFetchTextChars
	ModelCallIDPrefix  = service.ModelCallIDPrefix
)

// NewRegistry returns a registry holding the built-in types
// (service.NewRegistry).
func NewRegistry() *Registry { return service.NewRegistry() }

// Service returns the service layer the server's handlers call.
func (s *Server) Service() *service.Service { return s.svc }

// EffectID is the id of the effect with an idempotency key
// (service.EffectID).
func EffectID(key string) string { return service.EffectID(key) }

// ModelCallRequestHash is the key of a recorded model call
// (service.ModelCallRequestHash).
func ModelCallRequestHash(request json.RawMessage) (hashing.Digest, error) {
	return service.ModelCallRequestHash(request)
}

// ModelCallID is the artifact id of a recorded model call
// (service.ModelCallID).
func ModelCallID(requestHash hashing.Digest) string { return service.ModelCallID(requestHash) }
