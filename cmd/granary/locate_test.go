package main

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/granary-go/granary/actor"
)

type stubLocator struct {
	asked []actor.GrainID
	err   error
}

func (s *stubLocator) Locate(_ context.Context, id actor.GrainID) (string, bool, error) {
	s.asked = append(s.asked, id)
	return "b", id.Key == "here", s.err
}

func TestLocateAnswersFromTheDirectory(t *testing.T) {
	s := &stubLocator{}
	mux := http.NewServeMux()
	handleLocate(mux, s)
	get := func(query string) (int, string) {
		rec := httptest.NewRecorder()
		mux.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/locate?"+query, nil))
		return rec.Code, rec.Body.String()
	}
	code, body := get("type=t.T&key=here")
	require.Equal(t, http.StatusOK, code)
	assert.JSONEq(t, `{"type":"t.T","key":"here","found":true,"silo":"b"}`, body)
	for _, bad := range []string{"", "type=t.T", "type=&key=k", "type=a&type=b&key=k", "type=t&key=k&x=1", "type=t&key=" + strings.Repeat("k", maxLocateKeyBytes+1), "type=%zz&key=k"} {
		code, _ := get(bad)
		assert.Equal(t, http.StatusBadRequest, code, "%q", bad)
	}
	assert.Len(t, s.asked, 1, "a bad query asks nothing")
	s.err = errors.New("no directory")
	code, _ = get("type=t.T&key=k")
	assert.Equal(t, http.StatusServiceUnavailable, code)
}

func FuzzLocateQuery(f *testing.F) {
	for _, seed := range []string{"type=t.T&key=k", "type=&key=", "key=k&type=t", "type=%zz", "type=a&type=b&key=k", ";;&&=="} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, raw string) {
		id, err := parseLocateQuery(raw)
		if err != nil {
			if !errors.Is(err, errLocateQuery) {
				t.Fatalf("%q: %v does not wrap errLocateQuery", raw, err)
			}
			return
		}
		if id.Type == "" || len(id.Type) > maxLocateTypeBytes || len(id.Key) > maxLocateKeyBytes || len(id.Type)+len(id.Key) > len(raw) {
			t.Fatalf("%q: accepted %+v", raw, id)
		}
	})
}
