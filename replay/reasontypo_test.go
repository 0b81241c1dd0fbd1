package replay

import "testing"

func TestBoundaryTypo(t *testing.T) {
	for reason, want := range map[string]string{
		"pre-wave1":         "pre-wave-1",
		"pre_wave_2":        "pre-wave-2",
		"Pre-Wave-3":        "pre-wave-3",
		"prewave-4":         "pre-wave-4",
		"pre-temepr":        "pre-temper",
		"pre-wvae-3":        "pre-wave-3",
		"pre-qg-fix-round1": "pre-qg-fix-round-1",
		// Not typos: boundaries, and reasons that are no boundary at all.
		"pre-wave-1":         "",
		"pre-temper-retry":   "",
		"manual":             "",
		"before-refactor":    "",
		"pre-restore-safety": "",
		"pre-deploy":         "",
	} {
		got, ok := BoundaryTypo(reason)
		if got != want || ok != (want != "") {
			t.Errorf("BoundaryTypo(%q) = %q, %v; want %q", reason, got, ok, want)
		}
	}
}

func FuzzBoundaryTypo(f *testing.F) {
	for _, s := range []string{"pre-wave1", "pre-temepr", "x", "pre--", "pre-wave-"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, reason string) {
		known, ok := BoundaryTypo(reason)
		if ok && !IsBoundaryReason(known) {
			t.Errorf("BoundaryTypo(%q) suggests %q, which is no boundary", reason, known)
		}
		if ok && IsBoundaryReason(reason) {
			t.Errorf("a boundary reason %q taken for a typo", reason)
		}
	})
}
