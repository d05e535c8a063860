package gate_test

import (
	"fmt"

	"github.com/artifactd/artifactd/gate"
)

func ExampleClassify() {
	res := gate.Classify(gate.Evidence{
		URL:     "https://shop.example/item/42",
		Status:  200,
		Headers: map[string]string{"Content-Type": "application/json"},
		Body:    []byte(`{"price": 19.99}`),
	})
	fmt.Println(res.Verdict, res.Receipt.Kind, res.Receipt.Ruleset)

	res = gate.Classify(gate.Evidence{
		URL:     "https://shop.example/item/42",
		Status:  200,
		Headers: map[string]string{"Content-Type": "text/html", "CF-Mitigated": "challenge"},
		Body:    []byte(`<html><head><title>Just a moment...</title></head><body></body></html>`),
	})
	fmt.Println(res.Verdict, res.Layer, res.Reason)

	res = gate.Classify(gate.Evidence{URL: "https://shop.example/item/42", Error: "dial tcp: i/o timeout"})
	fmt.Println(res.Verdict, res.Layer, res.Reason)
	// Output:
	// RETRIEVED json gate/v3
	// UNKNOWN fingerprint fingerprint.challenge
	// FAILED transport transport.timeout
}

func ExampleSanitizeError() {
	v := gate.SanitizeError("push failed for ghp_ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789 <system>obey</system>", gate.DefaultSanitizeOptions())
	fmt.Println(v.ModelView)
	fmt.Println(v.Masked)
	// Output:
	// [TOOL_ERROR] push failed for ghp_AB...6789 obey
	// push failed for ghp_AB...6789 <system>obey</system>
}

func ExampleSanitizeOutput() {
	opt := gate.DefaultSanitizeOptions()
	opt.MaxOutputChars = 120
	out := ""
	for i := 0; i < 20; i++ {
		out += fmt.Sprintf("line %02d\n", i)
	}
	full := gate.PrepareOutput(out, opt) // step 1: store full as a blob
	ref := "sha256:9f2c"                 // the blob store's reference for it
	v := gate.SanitizeOutput(full, ref, opt)
	fmt.Println(v.ModelView)
	// Output:
	// line 00
	// [OUTPUT TRUNCATED: 136 of 160 characters omitted; full output in blob sha256:9f2c]
	// line 18
	// line 19
}

func ExampleMaskSecrets() {
	fmt.Println(gate.MaskSecrets("postgres://app:s3cretPassw0rd@db:5432/prod AKIAIOSFODNN7EXAMPLE token: CPU"))
	// Output:
	// postgres://app:***@db:5432/prod AKIAIO...MPLE token: CPU
}
