package api

import (
	"crypto/sha256"
	"encoding/base64"
	"net/http"
	"strconv"
	"time"

	"fusebox/internal/fastjson"
	"fusebox/raftstore/state"
)

// meta stamps a command with the proposer's clock and the author: the name
// of the token that authorised the request ("anonymous" without tokens),
// never a client-supplied header. It is set here, before proposing, so a
// write a follower forwards to the leader carries its caller's name inside
// the command.
func (s *Server) meta(r *http.Request) state.CommandMeta {
	return s.metaFor(r, nil)
}

// metaFor is meta for a write whose decoded body in (nil: none) is part of
// its dedup id: a task submit's, so that an X-Request-Id reused for another
// body is another write, not the first one's answer.
func (s *Server) metaFor(r *http.Request, in any) state.CommandMeta {
	author := CallerName(r.Context())
	id := r.Header.Get("X-Request-Id")
	var body []byte
	if id != "" && in != nil {
		body, _ = fastjson.Marshal(in) // decoded from JSON: it encodes
	}
	return state.CommandMeta{At: time.Now().UTC(), Author: author, RequestID: scopedRequestID(author, r.Pattern, id, body)}
}

// scopedRequestID is the dedup id a write is proposed with: the caller's
// X-Request-Id within its token's name, the route and (for submits) the
// body, hashed. One caller's id never answers for another's: unscoped, a
// producer that sent an id another tenant (or an operator's script) would
// use later made that write a no-op answered with the first one's result —
// a submit answered 202 and never stored. Nor does an id reused on another
// route or with another body (a batch's results given to a single submit,
// another namespace's task id as the answer). An id longer than the log's
// bound is refused before (checkRequestText, naming the header); here it
// is passed as it is.
func scopedRequestID(author, route, id string, body []byte) string {
	if id == "" || len(id) > state.MaxRequestIDLen {
		return id
	}
	h := sha256.New()
	for _, part := range []string{author, route, id} {
		h.Write([]byte(strconv.Itoa(len(part)) + ":" + part + ":"))
	}
	h.Write(body)
	return "rid2:" + base64.RawURLEncoding.EncodeToString(h.Sum(nil))
}
