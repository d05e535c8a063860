package main

import (
	"context"
	"fmt"
	"io"
	"runtime/debug"
)

// buildVersion describes this binary from its build information: the
// module version (a tag for `go install …@vX`, "(devel)" for a local
// build), the VCS revision and time when the build recorded them, and
// the Go version.
func buildVersion(info *debug.BuildInfo, ok bool) string {
	if !ok || info == nil {
		return "artifactd (no build information)"
	}
	version := info.Main.Version
	if version == "" {
		version = "(devel)"
	}
	var rev, at, modified string
	for _, s := range info.Settings {
		switch s.Key {
		case "vcs.revision":
			rev = s.Value
		case "vcs.time":
			at = s.Value
		case "vcs.modified":
			if s.Value == "true" {
				modified = "+dirty"
			}
		}
	}
	out := "artifactd " + version
	if rev != "" {
		if len(rev) > 12 {
			rev = rev[:12]
		}
		out += " (" + rev + modified
		if at != "" {
			out += ", " + at
		}
		out += ")"
	}
	return out + " " + info.GoVersion
}

func runVersion(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := newFlagSet("version", "", stderr)
	pos, err := parseInterspersed(fs, args)
	if err != nil {
		return flagExit(err)
	}
	if len(pos) > 0 {
		return fail(stderr, exitUsage, "version: unexpected argument %q", pos[0])
	}
	fmt.Fprintln(stdout, buildVersion(debug.ReadBuildInfo()))
	return exitOK
}
