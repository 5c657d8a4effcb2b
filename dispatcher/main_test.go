package dispatcher_test

import (
	"fmt"
	"os"
	"testing"
)

// suiteBackend is the store the engine suite runs over: "bolt" or "redis".
var suiteBackend = "bolt"

// TestMain runs the engine suite over both backends the engine runs on in
// production: the embedded bbolt file, then a real redis-server (which,
// under CI, must be installed: redistest fails rather than skips).
// PRACTICEGW_TEST_STORE=bolt or =redis runs it over one only.
func TestMain(m *testing.M) {
	only := os.Getenv("PRACTICEGW_TEST_STORE")
	code := 0
	for _, backend := range []string{"bolt", "redis"} {
		if only != "" && only != backend {
			continue
		}
		suiteBackend = backend
		fmt.Printf("=== the engine suite over %s\n", backend)
		if code = m.Run(); code != 0 {
			break
		}
	}
	os.Exit(code)
}
