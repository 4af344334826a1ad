// Package metrics owns the broker's CloudWatch metrics: what they are
// called (the names themselves are metricname's, which infra reads too),
// their dimensions and units, and how the functions emit them, as
// documents in CloudWatch's embedded metric format (EMF) written as JSON
// lines to stdout, which CloudWatch Logs turns into metrics. Emitting one
// costs no API call and no latency.
//
// The broker's own code knows nothing of metrics: a Store decorator counts
// operations as they start and finish and cleanups as they give up,
// CountPolls counts last_operation polls at the HTTP surface, and Reap
// records what one run of the reaper did. A nil *Recorder records nothing,
// which is what the local broker and the operator command use.
package metrics

import (
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"sync"
	"time"
)

// Unit is a CloudWatch unit.
type Unit string

// The units the broker's metrics use.
const (
	Count        Unit = "Count"
	Milliseconds Unit = "Milliseconds"
)

// Metric is one value of a document.
type Metric struct {
	Name  string
	Unit  Unit
	Value float64
}

// Dimension is one dimension's name and value.
type Dimension struct {
	Name, Value string
}

// Writer writes EMF documents, one JSON line each.
type Writer struct {
	// Namespace is the CloudWatch namespace of every metric.
	Namespace string
	// Now stamps the documents; time.Now by default.
	Now func() time.Time
	// Logger, when set, is told about a document that could not be
	// written: a metric never fails what it measures.
	Logger *slog.Logger

	mu sync.Mutex
	w  io.Writer
}

// NewWriter returns a Writer of documents in namespace to w.
func NewWriter(w io.Writer, namespace string) *Writer {
	return &Writer{Namespace: namespace, Now: time.Now, w: w}
}

// emfMetadata is the "_aws" member of a document.
type emfMetadata struct {
	Timestamp         int64          `json:"Timestamp"`
	CloudWatchMetrics []emfDirective `json:"CloudWatchMetrics"`
}

type emfDirective struct {
	Namespace  string          `json:"Namespace"`
	Dimensions [][]string      `json:"Dimensions"`
	Metrics    []emfDefinition `json:"Metrics"`
}

type emfDefinition struct {
	Name string `json:"Name"`
	Unit Unit   `json:"Unit"`
}

// Write writes one document holding metrics, with the dimensions' values,
// aggregated along each of sets: each set lists the names of the dimensions
// (of dims) a metric is recorded under; an empty set records it with no
// dimension, the total that alarms watch. The document is written with one
// Write call, so that lines written to the same stream by the logger do not
// interleave with it.
func (w *Writer) Write(dims []Dimension, sets [][]string, metrics ...Metric) {
	if w == nil || len(metrics) == 0 {
		return
	}
	now := time.Now
	if w.Now != nil {
		now = w.Now
	}
	doc := map[string]any{}
	for _, d := range dims {
		doc[d.Name] = d.Value
	}
	defs := make([]emfDefinition, 0, len(metrics))
	for _, m := range metrics {
		doc[m.Name] = m.Value
		defs = append(defs, emfDefinition{Name: m.Name, Unit: m.Unit})
	}
	if sets == nil {
		sets = [][]string{{}}
	}
	doc["_aws"] = emfMetadata{
		Timestamp:         now().UnixMilli(),
		CloudWatchMetrics: []emfDirective{{Namespace: w.Namespace, Dimensions: sets, Metrics: defs}},
	}
	line, err := json.Marshal(doc)
	if err == nil {
		w.mu.Lock()
		_, err = w.w.Write(append(line, '\n'))
		w.mu.Unlock()
	}
	if err != nil && w.Logger != nil {
		w.Logger.Warn("write metrics", "error", fmt.Sprintf("%v", err))
	}
}
