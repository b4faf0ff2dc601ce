package httplimit

import (
	"encoding/json"
	"net/http/httptest"
	"strings"
	"testing"
	"unicode/utf8"
)

// FuzzRefusalBodyIsJSON checks that a refusal's body is the JSON that
// encoding/json reads back, whatever reason the limiter gave.
func FuzzRefusalBodyIsJSON(f *testing.F) {
	for _, seed := range []string{"Rate limit exceeded", `a "quoted" \ reason`, "tab\tnew\nline\x00", "é ✓ 😀", "\xff\xfe bad", "</script>"} {
		f.Add(seed, int64(3))
	}
	f.Fuzz(func(t *testing.T, reason string, retry int64) {
		w := httptest.NewRecorder()
		writeBody(w, 429, reason, retry)
		var got struct {
			Status     int    `json:"status"`
			Error      string `json:"error"`
			Reason     string `json:"reason"`
			RetryAfter int64  `json:"retry_after"`
		}
		if err := json.Unmarshal(w.Body.Bytes(), &got); err != nil {
			t.Fatalf("body %q: %v", w.Body.String(), err)
		}
		var want strings.Builder // each invalid byte replaced on its own
		for i := 0; i < len(reason); {
			r, size := utf8.DecodeRuneInString(reason[i:])
			want.WriteRune(r)
			i += size
		}
		if got.Status != 429 || got.Error != "Too Many Requests" || got.Reason != want.String() || got.RetryAfter != retry {
			t.Fatalf("body %q read back as %+v", w.Body.String(), got)
		}
	})
}
