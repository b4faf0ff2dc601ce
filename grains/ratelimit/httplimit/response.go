package httplimit

import (
	"net/http"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/granary-go/granary/grains/ratelimit/internal/retryafter"
)

// The RateLimit-Policy and RateLimit fields follow the IETF draft
// draft-ietf-httpapi-ratelimit-headers-10 ("RateLimit header fields for
// HTTP"; the syntax is the same since -08): each field is a
// structured-field List of items, an sf-string naming the quota policy
// (here the rule) with parameters. A policy states its quota q and window
// w in seconds; a RateLimit item states the quota remaining r and the
// seconds t until it comes back. The older drafts' RateLimit-Limit,
// RateLimit-Remaining and RateLimit-Reset are not sent.
//
// Header names in their canonical form, so that setting them canonicalises
// nothing per request (textproto writes RateLimit as Ratelimit; field
// names are case-insensitive).
const (
	headerPolicy      = "Ratelimit-Policy"
	headerRateLimit   = "Ratelimit"
	headerRetryAfter  = "Retry-After"
	headerContentType = "Content-Type"
)

// Header values every refusal shares; net/http only reads them.
var (
	jsonContentType = []string{"application/json"}
	oneSecond       = []string{"1"}
)

// sfString returns s (printable ASCII, as Options.Validate checks) as a
// structured-field String.
func sfString(s string) string {
	return `"` + strings.NewReplacer(`\`, `\\`, `"`, `\"`).Replace(s) + `"`
}

// policyField is the RateLimit-Policy item of a rule named quoted, whose
// quota is q per w seconds (w 0: no window, as for a concurrency limit).
func policyField(quoted string, q, w int64) string {
	f := quoted + ";q=" + strconv.FormatInt(q, 10)
	if w > 0 {
		f += ";w=" + strconv.FormatInt(w, 10)
	}
	return f
}

// reject answers a request the rule's limiter refused for reason, with a
// retry hint (0: none): 429, Retry-After, the rule's RateLimit-Policy and
// RateLimit fields, and the JSON body.
func (r *rule) reject(w http.ResponseWriter, reason string, hint time.Duration) {
	retry := retryafter.Seconds(hint)
	seconds := strconv.FormatInt(retry, 10)
	h := w.Header()
	h[headerRetryAfter] = []string{seconds}
	h[headerPolicy] = r.policy
	h[headerRateLimit] = []string{r.quoted + ";r=0;t=" + seconds}
	writeBody(w, http.StatusTooManyRequests, reason, retry)
}

// reasonUnavailable is the reason of a 503: no limiter answered.
const reasonUnavailable = "Rate limiter unavailable"

// writeUnavailable answers a request whose limiter could not be reached.
func writeUnavailable(w http.ResponseWriter) {
	w.Header()[headerRetryAfter] = oneSecond
	writeBody(w, http.StatusServiceUnavailable, reasonUnavailable, 1)
}

// writeBody writes the status and the JSON body of a refusal,
// {"status":..., "error":..., "reason":..., "retry_after":...}, in one
// buffer: refusals are what an overloaded service sends most.
func writeBody(w http.ResponseWriter, status int, reason string, retryAfter int64) {
	buf := make([]byte, 0, 96+len(reason))
	buf = append(buf, `{"status":`...)
	buf = strconv.AppendInt(buf, int64(status), 10)
	buf = append(buf, `,"error":`...)
	buf = appendJSONString(buf, http.StatusText(status))
	buf = append(buf, `,"reason":`...)
	buf = appendJSONString(buf, reason)
	buf = append(buf, `,"retry_after":`...)
	buf = strconv.AppendInt(buf, retryAfter, 10)
	buf = append(buf, "}\n"...)
	w.Header()[headerContentType] = jsonContentType
	w.WriteHeader(status)
	_, _ = w.Write(buf)
}

// appendJSONString appends s as a JSON string: quotes, backslashes and
// control characters escaped, invalid UTF-8 replaced, as encoding/json
// writes it but for HTML escaping, which a JSON API body does not need.
func appendJSONString(buf []byte, s string) []byte {
	const hex = "0123456789abcdef"
	buf = append(buf, '"')
	for i := 0; i < len(s); {
		c := s[i]
		switch {
		case c == '"' || c == '\\':
			buf = append(buf, '\\', c)
			i++
		case c < 0x20:
			buf = append(buf, '\\', 'u', '0', '0', hex[c>>4], hex[c&0xf])
			i++
		case c < utf8.RuneSelf:
			buf = append(buf, c)
			i++
		default:
			r, size := utf8.DecodeRuneInString(s[i:])
			if r == utf8.RuneError && size == 1 {
				buf = append(buf, `\ufffd`...)
			} else {
				buf = append(buf, s[i:i+size]...)
			}
			i += size
		}
	}
	return append(buf, '"')
}
