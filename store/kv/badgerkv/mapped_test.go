package badgerkv

import (
	"slices"
	"testing"
)

func TestMappingsUnder(t *testing.T) {
	maps := "" +
		"00400000-00452000 r-xp 00000000 08:02 173521      /usr/bin/artifactd\n" +
		"7f0000000000-7f0000400000 rw-s 00000000 fd:01 101   /data/db/000001.sst\n" +
		"7f0000400000-7f0004400000 rw-s 00000000 fd:01 102   /data/db/00005.mem\n" +
		"7f0004400000-7f0004401000 r--s 00000000 fd:01 103   /data/db/with space/000002.sst\n" +
		"7f0004401000-7f0004402000 rw-s 00000000 fd:01 104   /data/db2/000003.sst\n" +
		"7f0004402000-7f0004403000 rw-s 00000000 fd:01 105   /data/db/000004.sst (deleted)\n" +
		"7f0004403000-7f0004404000 rw-p 00000000 00:00 0 \n" +
		"7f0004404000-7f0004405000 rw-p 00000000 00:00 0     [heap]\n" +
		"garbage line\n" +
		"zz-7f0004406000 rw-s 00000000 fd:01 106   /data/db/000005.sst\n" +
		"7f0004407000-7f0004406000 rw-s 00000000 fd:01 107   /data/db/000006.sst\n" +
		"7f0004408000-7f0004409000 rw-s 00000000 fd:01 108   /data/db/000007.sst"
	got := mappingsUnder([]byte(maps), "/data/db")
	want := []span{
		{0x7f0000000000, 0x7f0000400000},
		{0x7f0000400000, 0x7f0004400000},
		{0x7f0004400000, 0x7f0004401000},
		{0x7f0004408000, 0x7f0004409000},
	}
	if !slices.Equal(got, want) {
		t.Fatalf("mappingsUnder:\n got %x\nwant %x", got, want)
	}
	if got := mappingsUnder(nil, "/data/db"); len(got) != 0 {
		t.Fatalf("no maps: %x", got)
	}
}

func TestStartTrimmerOff(t *testing.T) {
	if tr := startTrimmer(t.TempDir(), -1, nil); tr != nil {
		t.Fatal("a negative budget started a trimmer")
	}
	var tr *trimmer
	tr.close() // a driver without a trimmer closes it all the same
}
