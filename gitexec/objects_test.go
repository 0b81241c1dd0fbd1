package gitexec

import (
	"strings"
	"testing"
)

// TestScrubbedEnvSetsMallocTrim checks that every git child gets rewind's
// malloc trim threshold exactly once, whatever the caller's environment says.
func TestScrubbedEnvSetsMallocTrim(t *testing.T) {
	t.Setenv("MALLOC_TRIM_THRESHOLD_", "1")
	var found []string
	for _, kv := range scrubbedEnv("LC_ALL=C") {
		if strings.HasPrefix(kv, "MALLOC_TRIM_THRESHOLD_=") {
			found = append(found, kv)
		}
	}
	if len(found) != 1 || found[0] != mallocTrim {
		t.Errorf("MALLOC_TRIM_THRESHOLD_ in the environment: %q, want only %q", found, mallocTrim)
	}
}

// TestPackBlobsSetting checks that PackBlobs asks git for the bulk check-in
// only where update-index gathers it into one pack.
func TestPackBlobsSetting(t *testing.T) {
	for _, pack := range []bool{false, true} {
		args := strings.Join(Shadow{PackBlobs: pack}.overrides(), " ")
		want := pack && BulkCheckinPacks()
		if got := strings.Contains(args, "core.bigFileThreshold=1"); got != want {
			t.Errorf("PackBlobs %v on git %s: bigFileThreshold set %v, want %v", pack, gitVersion, got, want)
		}
	}
	if atLeast("2.36.9", bulkCheckinVersion) || !atLeast("2.37.0", bulkCheckinVersion) {
		t.Errorf("the bulk check-in version boundary is not 2.37")
	}
}
