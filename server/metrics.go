package server

import (
	"log/slog"
	"net/http"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"lifeboat/crypt"
	"lifeboat/prune"
	"lifeboat/recovery"
)

// WorkspaceLister lists every workspace with its last good checkpoint and
// health (a RecoveryService).
type WorkspaceLister interface {
	Workspaces() ([]recovery.Workspace, error)
}

// OperationLister lists the recovery operations of a workspace, or of all
// workspaces when ws is empty (a RecoveryService).
type OperationLister interface {
	Operations(ws string) ([]recovery.Operation, error)
}

// HoldLister lists the unresolved repair holds (a RecoveryService).
type HoldLister interface {
	RepairHolds() ([]recovery.Hold, error)
}

// The server's seam to recovery is the source serve uses.
var (
	_ WorkspaceLister = RecoveryService(nil)
	_ OperationLister = RecoveryService(nil)
	_ HoldLister      = RecoveryService(nil)
)

// MetricsSource is what Metrics reads at every scrape. Any field may be
// nil: its metrics are then left out. A source that fails is logged and
// counted in lifeboat_metrics_source_errors_total{source}; its metrics are
// left out of that scrape rather than reported as zero.
type MetricsSource struct {
	Workspaces WorkspaceLister
	Operations OperationLister
	Holds      HoldLister
	// Now is the clock the ages are measured with; default time.Now.
	Now func() time.Time
	// Logger gets a warning for each failed source; default discard.
	Logger *slog.Logger
}

// Metrics is the Prometheus view of `lifeboat serve`, on a registry of its
// own. Counters move through Receipt and Prune; the gauges are read from
// the MetricsSource at scrape time; lifeboat_key_derivations_total is
// crypt.KeyDerivations(). Labels carry workspace ids, reasons, outcomes
// and states, never a secret. Safe for concurrent use.
type Metrics struct {
	reg      *prometheus.Registry
	captures *prometheus.CounterVec   // reason, outcome
	duration *prometheus.HistogramVec // reason
	bytes    prometheus.Counter
	newBytes prometheus.Counter
	prunes   *prometheus.CounterVec // outcome
	freed    prometheus.Counter
	state    *stateCollector
}

// captureBuckets are the bounds (seconds) of
// lifeboat_capture_duration_seconds: 50 ms to 30 min.
var captureBuckets = []float64{0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600, 1200, 1800}

// NewMetrics makes the metrics with src as the scrape-time source (see
// SetSource to give it later).
func NewMetrics(src MetricsSource) *Metrics {
	m := &Metrics{
		reg: prometheus.NewRegistry(),
		captures: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "lifeboat_captures_total",
			Help: "Capture requests (park, periodic, manual) by reason and outcome, throttled, unchanged and not_running included."},
			[]string{"reason", "outcome"}),
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "lifeboat_capture_duration_seconds",
			Help:    "Time from start to end of the capture requests that ran a capture (captured, partial, failed, quiesce_timeout, cancelled), by reason.",
			Buckets: captureBuckets}, []string{"reason"}),
		bytes: prometheus.NewCounter(prometheus.CounterOpts{Name: "lifeboat_capture_bytes_total",
			Help: "Bytes of the files in the snapshots captures wrote (captured and partial)."}),
		newBytes: prometheus.NewCounter(prometheus.CounterOpts{Name: "lifeboat_capture_new_bytes_total",
			Help: "Bytes of new content the captures added to the repository (captured and partial)."}),
		prunes: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "lifeboat_prune_runs_total",
			Help: "Prune runs by outcome (ok, failed)."}, []string{"outcome"}),
		freed: prometheus.NewCounter(prometheus.CounterOpts{Name: "lifeboat_prune_bytes_freed_total",
			Help: "Bytes of pack files prune deleted, failed runs' deletions included."}),
		state: &stateCollector{errors: map[string]uint64{"workspaces": 0, "operations": 0, "holds": 0}},
	}
	for _, o := range []string{"ok", "failed"} {
		m.prunes.WithLabelValues(o)
	}
	m.SetSource(src)
	m.reg.MustRegister(m.captures, m.duration, m.bytes, m.newBytes, m.prunes, m.freed, m.state,
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "lifeboat_key_derivations_total",
			Help: "Password key derivations (argon2id) this process did; captures by a server that holds its unlocked keys do none."},
			func() float64 { return float64(crypt.KeyDerivations()) }),
		collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return m
}

// SetSource replaces the scrape-time source, for a server whose store and
// recovery service exist only after the lifecycle (whose OnReceipt already
// reports to m) was made.
func (m *Metrics) SetSource(src MetricsSource) {
	if src.Now == nil {
		src.Now = time.Now
	}
	if src.Logger == nil {
		src.Logger = slog.New(slog.DiscardHandler)
	}
	m.state.mu.Lock()
	m.state.src = src
	m.state.mu.Unlock()
}

// Handler serves the metrics in the Prometheus exposition formats. A
// metric that cannot be collected is left out; the rest is served.
func (m *Metrics) Handler() http.Handler {
	return promhttp.InstrumentMetricHandler(m.reg, promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{
		ErrorHandling: promhttp.ContinueOnError, Registry: m.reg}))
}

// Receipt counts one capture request: recovery.Config.OnReceipt calls it
// for every park, capture and periodic decision.
func (m *Metrics) Receipt(r recovery.Receipt) {
	reason := string(r.Reason)
	if reason == "" {
		reason = "unknown"
	}
	m.captures.WithLabelValues(reason, string(r.Outcome)).Inc()
	switch r.Outcome {
	case recovery.Captured, recovery.Partial, recovery.Failed, recovery.QuiesceTimeout, recovery.Cancelled:
		if !r.Started.IsZero() && !r.Finished.Before(r.Started) {
			m.duration.WithLabelValues(reason).Observe(r.Finished.Sub(r.Started).Seconds())
		}
	}
	if r.Outcome == recovery.Captured || r.Outcome == recovery.Partial {
		m.bytes.Add(float64(r.Bytes))
		m.newBytes.Add(float64(r.NewBytes))
	}
}

// Prune counts one prune run with what Execute returned: failed when err
// is not nil. The bytes it deleted count either way.
func (m *Metrics) Prune(st prune.Stats, err error) {
	outcome := "ok"
	if err != nil {
		outcome = "failed"
	}
	m.prunes.WithLabelValues(outcome).Inc()
	m.freed.Add(float64(st.BytesDeleted))
}

// Scrape-time metrics.
var (
	descLastGoodAge = prometheus.NewDesc("lifeboat_last_good_age_seconds",
		"Seconds since the start of the capture of each workspace's last good checkpoint (workspaces without one are left out).",
		[]string{"workspace"}, nil)
	descWorkspaces = prometheus.NewDesc("lifeboat_workspaces",
		"Workspaces by the health their last inspection found (unknown: not inspected yet).", []string{"health"}, nil)
	descOperations = prometheus.NewDesc("lifeboat_recovery_operations",
		"Recovery operations in the state store by state, the terminal recovered and failed included.", []string{"state"}, nil)
	descHolds = prometheus.NewDesc("lifeboat_repair_holds_open",
		"Repair holds waiting for an operator's resolution.", nil, nil)
	descSourceErrors = prometheus.NewDesc("lifeboat_metrics_source_errors_total",
		"Scrapes whose read of a source (workspaces, operations, holds) failed; its metrics were left out of that scrape.",
		[]string{"source"}, nil)
)

// metricHealth and metricOpStates are always reported, zero included, so an
// alert on one of them has a series to watch.
var (
	metricHealth = []recovery.HealthState{recovery.HealthOK, recovery.HealthLost, recovery.HealthUnreachable,
		recovery.HealthAuthFailed, recovery.HealthRateLimited, recovery.HealthCheckFailed, recovery.HealthRecovering}
	metricOpStates = []recovery.OpState{recovery.OpApproved, recovery.OpCreating, recovery.OpRestoring, recovery.OpValidating,
		recovery.OpSwitching, recovery.OpRollingBack, recovery.OpRecovered, recovery.OpFailed}
)

const healthUnknown = "unknown"

// stateCollector reads the MetricsSource at every Collect.
type stateCollector struct {
	mu     sync.Mutex
	src    MetricsSource
	errors map[string]uint64 // failed reads by source
}

func (c *stateCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{descLastGoodAge, descWorkspaces, descOperations, descHolds, descSourceErrors} {
		ch <- d
	}
}

func (c *stateCollector) Collect(ch chan<- prometheus.Metric) {
	c.mu.Lock()
	src := c.src
	c.mu.Unlock()
	if src.Workspaces != nil {
		if wss, err := src.Workspaces.Workspaces(); c.check(src, "workspaces", err) {
			now := src.Now()
			health := map[string]float64{healthUnknown: 0}
			for _, s := range metricHealth {
				health[string(s)] = 0
			}
			for _, w := range wss {
				h := healthUnknown
				if w.Health != nil && w.Health.State != "" {
					h = string(w.Health.State)
				}
				health[h]++
				if w.LastGood != nil {
					ch <- prometheus.MustNewConstMetric(descLastGoodAge, prometheus.GaugeValue, max(0, now.Sub(w.LastGood.Time).Seconds()), w.ID)
				}
			}
			for h, n := range health {
				ch <- prometheus.MustNewConstMetric(descWorkspaces, prometheus.GaugeValue, n, h)
			}
		}
	}
	if src.Operations != nil {
		if ops, err := src.Operations.Operations(""); c.check(src, "operations", err) {
			count := map[string]float64{}
			for _, s := range metricOpStates {
				count[string(s)] = 0
			}
			for _, op := range ops {
				count[string(op.State)]++
			}
			for s, n := range count {
				ch <- prometheus.MustNewConstMetric(descOperations, prometheus.GaugeValue, n, s)
			}
		}
	}
	if src.Holds != nil {
		if holds, err := src.Holds.RepairHolds(); c.check(src, "holds", err) {
			ch <- prometheus.MustNewConstMetric(descHolds, prometheus.GaugeValue, float64(len(holds)))
		}
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	for s, n := range c.errors {
		ch <- prometheus.MustNewConstMetric(descSourceErrors, prometheus.CounterValue, float64(n), s)
	}
}

// check reports whether a source's read succeeded; a failure is logged
// and counted.
func (c *stateCollector) check(src MetricsSource, source string, err error) bool {
	if err == nil {
		return true
	}
	src.Logger.Warn("metrics: reading a source failed; its metrics are left out of this scrape", "source", source, "error", err)
	c.mu.Lock()
	defer c.mu.Unlock()
	c.errors[source]++
	return false
}
