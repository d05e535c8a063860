package gate

import (
	"encoding/json"
	"errors"
	"fmt"
)

// VerdictData is the data of a fetch_verdict artifact as the gate writes
// it. Verdict, Reason, Layer, URL, FinalURL and Status repeat the
// receipt's; BodyBlob is the blob holding the raw body, equal to
// Receipt.BodySHA256.
type VerdictData struct {
	Verdict  Verdict `json:"verdict"`
	Reason   Reason  `json:"reason,omitempty"`
	Layer    Layer   `json:"layer,omitempty"`
	URL      string  `json:"url"`
	FinalURL string  `json:"final_url,omitempty"`
	Status   int     `json:"status"`
	Receipt  Receipt `json:"receipt"`
	BodyBlob string  `json:"body_blob"`
	// FetchedBy is "agent" for posted evidence, "artifactd" for a fetch
	// the server performed.
	FetchedBy string `json:"fetched_by"`
	// ProducedBy names who made the read, as the request says (an agent,
	// a tool, a worker); the artifact itself is always produced by the
	// gate. Empty when the request named no one.
	ProducedBy string `json:"produced_by,omitempty"`
	// RenderedFrom, when set, holds the receipt and body blob of the
	// script shell that was rendered; Receipt and BodyBlob are then the
	// rendered document's.
	RenderedFrom *RenderedFrom `json:"rendered_from,omitempty"`
	// RenderError says why a script shell could not be rendered (the
	// verdict is then the shell's own).
	RenderError string `json:"render_error,omitempty"`
}

// RenderedFrom is the fetched script shell behind a rendered verdict.
type RenderedFrom struct {
	Receipt  Receipt `json:"receipt"`
	BodyBlob string  `json:"body_blob"`
}

// Values of VerdictData.FetchedBy.
const (
	FetchedByAgent     = "agent"
	FetchedByArtifactd = "artifactd"
)

// ErrVerdict marks a fetch verdict that its receipt and body do not bear.
var ErrVerdict = errors.New("refused fetch verdict")

// VerdictError says why a fetch_verdict's data is refused: Pointer is a
// JSON pointer into the data, Rule a short rule name.
type VerdictError struct {
	Pointer string
	Rule    string
	Detail  string
}

func (e *VerdictError) Error() string { return "refused fetch verdict: " + e.Detail }

// Unwrap returns ErrVerdict.
func (e *VerdictError) Unwrap() error { return ErrVerdict }

func verdictError(ptr, rule, format string, a ...any) *VerdictError {
	return &VerdictError{Pointer: ptr, Rule: rule, Detail: fmt.Sprintf(format, a...)}
}

// BlobFunc returns the bytes of the blob with the given "sha256:<hex>"
// name; ok is false when no such blob is stored. err is an I/O failure.
type BlobFunc func(name string) (body []byte, ok bool, err error)

// CheckVerdict checks a fetch_verdict's data, so that no verdict can be
// recorded — by the gate path, a merge or a bundle import — that its
// receipt and body do not bear:
//   - the receipt names a ruleset this build knows (by name and hash, see
//     [Rulesets.Lookup]; a gate/v1 receipt without a hash is gate/v1), and
//     the verdict, reason, layer, URLs and status repeat it;
//   - body_blob equals the receipt's body_sha256;
//   - with blob set, that blob exists and holds the receipt's raw_bytes,
//     and the verdict is derived again with [ClassifyWith] under the
//     ruleset the receipt names, from the blob and the receipt (URL,
//     redirects, status, content type and encoding, read kind): the
//     recorded verdict may be stricter than the one derived again (the
//     receipt keeps no other headers, and header fingerprints can only
//     lower a verdict) but never laxer, so a FAILED turned into RETRIEVED
//     is refused however its hashes were recomputed;
//   - the same for a rendered verdict's script shell, which must have been
//     UNKNOWN extraction.script_shell.
//
// The error is a *VerdictError or one of blob's errors. CheckVerdict does
// no I/O of its own. It knows the built-in rulesets; [CheckVerdictWith]
// takes a set that holds an operator's too.
func CheckVerdict(data json.RawMessage, blob BlobFunc) error {
	return CheckVerdictWith(data, blob, nil)
}

// CheckVerdictWith is [CheckVerdict] with the rulesets a verifier knows
// (nil means the built-in ones): a receipt naming any other is refused
// ("/receipt/ruleset", rule "ruleset").
func CheckVerdictWith(data json.RawMessage, blob BlobFunc, rulesets *Rulesets) error {
	if rulesets == nil {
		rulesets = BuiltinRulesets()
	}
	var v VerdictData
	if err := json.Unmarshal(data, &v); err != nil {
		return verdictError("", "shape", "the data is not a fetch verdict: %v", err)
	}
	if err := checkReceipt("", v.Receipt, v.BodyBlob, blob, rulesets); err != nil {
		return err
	}
	rc := v.Receipt
	switch {
	case v.Verdict != rc.Verdict:
		return verdictError("/verdict", "matches_receipt", "verdict %q but the receipt says %q", v.Verdict, rc.Verdict)
	case v.Reason != rc.Reason || v.Layer != rc.Layer:
		return verdictError("/reason", "matches_receipt", "reason %q (layer %q) but the receipt says %q (layer %q)", v.Reason, v.Layer, rc.Reason, rc.Layer)
	case v.URL != rc.URL || v.FinalURL != rc.FinalURL || v.Status != rc.Status:
		return verdictError("/url", "matches_receipt", "url, final_url and status must repeat the receipt's")
	}
	if v.RenderedFrom != nil {
		shell := v.RenderedFrom.Receipt
		if shell.Verdict != Unknown || shell.Reason != ReasonScriptShell {
			return verdictError("/rendered_from/receipt/reason", "script_shell", "only an UNKNOWN extraction.script_shell is rendered")
		}
		if err := checkReceipt("/rendered_from", shell, v.RenderedFrom.BodyBlob, blob, rulesets); err != nil {
			return err
		}
	}
	return nil
}

// checkReceipt checks one receipt against its body blob (see
// CheckVerdict); at is the pointer of the object holding both.
func checkReceipt(at string, rc Receipt, blobRef string, blob BlobFunc, rulesets *Rulesets) error {
	rules, err := rulesets.Lookup(rc.Ruleset, rc.RulesetHash)
	if err != nil {
		return verdictError(at+"/receipt/ruleset", "ruleset", "%v: a verdict is derived again with the ruleset its receipt names", err)
	}
	if !rc.Verdict.Valid() {
		return verdictError(at+"/receipt/verdict", "enum", "want RETRIEVED, UNKNOWN or FAILED")
	}
	if blobRef != rc.BodySHA256 {
		return verdictError(at+"/body_blob", "matches_receipt", "body_blob %q is not the receipt's body_sha256 %q", blobRef, rc.BodySHA256)
	}
	if !isDigestName(blobRef) {
		return verdictError(at+"/body_blob", "digest", "want sha256:<64 hex digits>")
	}
	if blob == nil {
		return nil
	}
	body, ok, err := blob(blobRef)
	switch {
	case err != nil:
		return err
	case !ok:
		return verdictError(at+"/body_blob", "stored_blob", "no blob %s is stored: a receipt must name the bytes it judged", blobRef)
	case len(body) != rc.RawBytes:
		return verdictError(at+"/receipt/raw_bytes", "matches_blob", "raw_bytes %d but the blob holds %d bytes", rc.RawBytes, len(body))
	}
	again := ClassifyWith(ReceiptEvidence(rc, body), rules)
	if rc.Verdict.Severity() < again.Verdict.Severity() {
		return verdictError(at+"/receipt/verdict", "rederived", "the receipt and its blob give %s (%s), not %s", again.Verdict, again.Reason, rc.Verdict)
	}
	return nil
}

// ReceiptEvidence rebuilds, as far as a receipt records it, the evidence
// it was made from. The receipt keeps only the content type and encoding
// of the headers, so header-only fingerprints (which can only lower a
// verdict) are not seen again.
func ReceiptEvidence(rc Receipt, body []byte) Evidence {
	h := map[string]string{}
	if rc.ContentType != "" {
		h["content-type"] = rc.ContentType
	}
	if rc.ContentEncoding != "" {
		h["content-encoding"] = rc.ContentEncoding
	}
	return Evidence{Kind: rc.Source, URL: rc.URL, FinalURL: rc.FinalURL, Redirects: rc.Redirects, Status: rc.Status, Headers: h, Body: body, Error: rc.Error,
		Path: rc.Path, Size: rc.Size, Tool: rc.Tool}
}

// isDigestName reports whether s is "sha256:" and 64 lower-case hex digits.
func isDigestName(s string) bool {
	const p = "sha256:"
	if len(s) != len(p)+64 || s[:len(p)] != p {
		return false
	}
	for _, c := range s[len(p):] {
		if (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return false
		}
	}
	return true
}

// BlobRefs returns the blob names the data of a gate output records (the
// bytes it was judged or cut from): body_blob and rendered_from.body_blob
// of a fetch_verdict, full_blob of a tool_error or tool_output. Other
// types name none. Malformed data names none (its own checks refuse it).
func BlobRefs(typ string, data json.RawMessage) []string {
	var out []string
	switch typ {
	case "fetch_verdict":
		var v struct {
			BodyBlob     string `json:"body_blob"`
			RenderedFrom *struct {
				BodyBlob string `json:"body_blob"`
			} `json:"rendered_from"`
		}
		if json.Unmarshal(data, &v) != nil {
			return nil
		}
		out = append(out, v.BodyBlob)
		if v.RenderedFrom != nil {
			out = append(out, v.RenderedFrom.BodyBlob)
		}
	case "tool_error", "tool_output":
		var v struct {
			FullBlob string `json:"full_blob"`
		}
		if json.Unmarshal(data, &v) != nil {
			return nil
		}
		out = append(out, v.FullBlob)
	}
	kept := out[:0]
	for _, r := range out {
		if r != "" {
			kept = append(kept, r)
		}
	}
	return kept
}

// NewVerdictData returns the data of the fetch_verdict that records res:
// the verdict, reason and layer with the receipt they came from, and the
// receipt's body address as the body blob (which the caller stores).
func NewVerdictData(res Result, fetchedBy string) VerdictData {
	rc := res.Receipt
	return VerdictData{Verdict: res.Verdict, Reason: res.Reason, Layer: res.Layer,
		URL: rc.URL, FinalURL: rc.FinalURL, Status: rc.Status, Receipt: rc, BodyBlob: rc.BodySHA256, FetchedBy: fetchedBy}
}
