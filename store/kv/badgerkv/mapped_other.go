//go:build !linux

package badgerkv

// canPageOut says whether this platform has pageOut: not here, so the
// driver starts no trimmer.
const canPageOut = false

func residentFileBytes() (int64, error) { return 0, errPageOutUnsupported }
func readSelfMaps() ([]byte, error)     { return nil, errPageOutUnsupported }
func pageOut(span) error                { return errPageOutUnsupported }
