//go:build !linux

package badgerkv

import "errors"

// canPageOut says whether this platform has pageOut: not here, so the
// driver starts no trimmer.
const canPageOut = false

var errNoPageOut = errors.New("paging out mappings is only implemented on Linux")

func residentFileBytes() (int64, error) { return 0, errNoPageOut }
func readSelfMaps() ([]byte, error)     { return nil, errNoPageOut }
func pageOut(span) error                { return errNoPageOut }
