package ui_test

import (
	"fmt"
	"net/http"
	"testing"
	"time"

	"fusebox/ui"
)

// BenchmarkRecorderObserve is the cost the pool's observer goroutine pays
// per transition.
func BenchmarkRecorderObserve(b *testing.B) {
	rec, _ := ui.NewRecorder(0)
	tr := transition("d", 1, time.Now())
	b.ReportAllocs()
	for b.Loop() {
		rec.Observe(tr)
	}
}

// BenchmarkLocalTransitions serves a full default ring as JSON.
func BenchmarkLocalTransitions(b *testing.B) {
	rec, _ := ui.NewRecorder(0)
	for i := range ui.DefaultCapacity {
		rec.Observe(transition(fmt.Sprintf("dest-%d", i), uint64(i), time.Now()))
	}
	h := ui.New(ui.Deps{NodeID: "n1", Recorder: rec}, nil).Data()
	b.ReportAllocs()
	for b.Loop() {
		w := discardWriter{h: http.Header{}}
		req, _ := http.NewRequest(http.MethodGet, "/ui/api/transitions", nil)
		h.ServeHTTP(&w, req)
	}
}

type discardWriter struct{ h http.Header }

func (w *discardWriter) Header() http.Header         { return w.h }
func (w *discardWriter) Write(p []byte) (int, error) { return len(p), nil }
func (w *discardWriter) WriteHeader(int)             {}
