package httplimit

import (
	"encoding/json"
	"math"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// The RateLimit-Policy and RateLimit fields follow the IETF draft
// draft-ietf-httpapi-ratelimit-headers-10 ("RateLimit header fields for
// HTTP"; the syntax is the same since -08): each field is a
// structured-field List of items, an sf-string naming the quota policy
// (here the rule) with parameters. A policy states its quota q and window
// w in seconds; a RateLimit item states the quota remaining r and the
// seconds t until it comes back. The older drafts' RateLimit-Limit,
// RateLimit-Remaining and RateLimit-Reset are not sent.
const (
	headerPolicy     = "RateLimit-Policy"
	headerRateLimit  = "RateLimit"
	headerRetryAfter = "Retry-After"
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

// ceilSeconds returns ns nanoseconds in whole seconds, rounded up, capped
// at what a field can carry.
func ceilSeconds(ns float64) int64 {
	s := math.Ceil(ns / float64(time.Second))
	if s >= float64(maxFieldInteger) {
		return maxFieldInteger
	}
	return int64(s)
}

// maxFieldInteger is the largest Integer a structured field carries.
const maxFieldInteger = 999_999_999_999_999

// retryAfterSeconds is the Retry-After of a rejection whose limiter
// hinted d: whole seconds, rounded up so that a client that waits that
// long does not come back early; 1 without a hint (a concurrency limit, a
// wait that ran out of budget), so that clients back off rather than
// retry at once.
func retryAfterSeconds(d time.Duration) int64 {
	if d <= 0 {
		return 1
	}
	return max(ceilSeconds(float64(d)), 1)
}

// errorBody is the JSON body of the middleware's refusals.
type errorBody struct {
	Status     int    `json:"status"`
	Error      string `json:"error"`
	Reason     string `json:"reason"`
	RetryAfter int64  `json:"retry_after"`
}

// reject answers a request the rule's limiter refused for reason, with a
// retry hint (0: none): 429, Retry-After, the rule's RateLimit-Policy and
// RateLimit fields, and the JSON body.
func (r *rule) reject(w http.ResponseWriter, reason string, hint time.Duration) {
	retry := retryAfterSeconds(hint)
	seconds := strconv.FormatInt(retry, 10)
	h := w.Header()
	h.Set(headerRetryAfter, seconds)
	h.Set(headerPolicy, r.policy)
	h.Set(headerRateLimit, r.quoted+";r=0;t="+seconds)
	writeJSON(w, errorBody{
		Status:     http.StatusTooManyRequests,
		Error:      http.StatusText(http.StatusTooManyRequests),
		Reason:     reason,
		RetryAfter: retry,
	})
}

// reasonUnavailable is the reason of a 503: no limiter answered.
const reasonUnavailable = "Rate limiter unavailable"

// writeUnavailable answers a request whose limiter could not be reached.
func writeUnavailable(w http.ResponseWriter) {
	w.Header().Set(headerRetryAfter, "1")
	writeJSON(w, errorBody{
		Status:     http.StatusServiceUnavailable,
		Error:      http.StatusText(http.StatusServiceUnavailable),
		Reason:     reasonUnavailable,
		RetryAfter: 1,
	})
}

func writeJSON(w http.ResponseWriter, body errorBody) {
	data, err := json.Marshal(body)
	if err != nil { // a struct of strings and integers always encodes
		panic(err)
	}
	data = append(data, '\n')
	h := w.Header()
	h.Set("Content-Type", "application/json")
	h.Set("Content-Length", strconv.Itoa(len(data)))
	w.WriteHeader(body.Status)
	_, _ = w.Write(data)
}
