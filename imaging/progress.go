// Package imaging downloads, caches, decompresses and writes Talos disk
// images, then verifies what landed on the target. See docs/ARCHITECTURE.md.
package imaging

import (
	"sync"
	"time"
)

// Stage names one phase of a flash.
type Stage string

const (
	StageDownload Stage = "download"
	StageWrite    Stage = "write"
	StageVerify   Stage = "verify"
	StageDone     Stage = "done"
)

// Progress is one progress report. Total is 0 when unknown. For the write
// stage Done/Total count decompressed bytes when the uncompressed size is
// known (from the xz index or a raw file), else compressed bytes consumed
// (Compressed is then true).
type Progress struct {
	Stage      Stage
	Done       int64
	Total      int64
	Rate       float64       // bytes per second over the last few seconds
	ETA        time.Duration // 0 when unknown
	Compressed bool
	// Decoded is, for a write report that counts compressed bytes
	// (Compressed), the image's decoded bytes written so far: what the
	// card holds (0 otherwise: Done counts them then).
	Decoded int64
	// Target names the card of a per-card report (write, verify, done)
	// when several cards are flashed at once; empty otherwise.
	Target string
	// Image names the image of a report that is not a card's (download,
	// build) when several images are flashed at once (app/plan sets it);
	// empty otherwise.
	Image string
}

// ProgressFunc receives progress reports. Calls are serialized, throttled to
// about 10 per second per stage (first and last reports always delivered),
// and made from the pipeline's goroutines: keep it quick.
type ProgressFunc func(Progress)

const progressInterval = 100 * time.Millisecond

// meter throttles reports and computes a windowed rate.
type meter struct {
	mu         sync.Mutex
	fn         ProgressFunc
	stage      Stage
	total      int64
	compressed bool
	decoded    int64 // the decoded bytes behind a compressed count
	target     string
	last       time.Time
	lastDone   int64
	samples    [20]sample // ring: ~2 s of history at 10/s
	ns         int
	now        func() time.Time
}

type sample struct {
	t    time.Time
	done int64
}

func newMeter(fn ProgressFunc, stage Stage, total int64, compressed bool) *meter {
	if total < 0 {
		total = 0 // unknown, as Progress documents
	}
	m := &meter{fn: fn, stage: stage, total: total, compressed: compressed, now: time.Now}
	m.samples[0] = sample{m.now(), 0}
	m.ns = 1
	return m
}

// update reports done bytes if enough time passed (or force is set).
func (m *meter) update(done int64, force bool) {
	if m == nil || m.fn == nil {
		return
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	now := m.now()
	// A stage's complete report is its forced last one: a throttled report
	// that reaches the total is left out, so a stage reports completion
	// once (two "done == total" reports used to come when the last chunk's
	// report fell outside the interval, as on a loaded machine).
	if !force && (now.Sub(m.last) < progressInterval || m.total > 0 && done >= m.total) {
		return
	}
	m.last, m.lastDone = now, done
	oldest := m.windowStart(now)
	m.samples[m.ns%len(m.samples)] = sample{now, done}
	m.ns++
	p := Progress{Stage: m.stage, Done: done, Total: m.total, Compressed: m.compressed, Target: m.target}
	if m.compressed {
		p.Decoded = m.decoded
	}
	// A window shorter than half a report interval gives absurd rates (a
	// cache hit or the final "done" report): leave Rate unknown then.
	if dt := now.Sub(oldest.t); dt >= progressInterval/2 {
		p.Rate = float64(done-oldest.done) / dt.Seconds()
	}
	if p.Rate > 0 && m.total > done {
		p.ETA = time.Duration(float64(m.total-done) / p.Rate * float64(time.Second))
	}
	m.fn(p)
}

// rateWindow is how far back the rate looks: long enough to smooth bursty
// reads, short enough that a stall shows as zero within seconds.
const rateWindow = 2 * time.Second

// windowStart is the oldest sample at most rateWindow old, or the newest
// sample when all are older (a stall: the rate then drops to zero).
func (m *meter) windowStart(now time.Time) sample {
	n := min(m.ns, len(m.samples))
	newest := m.samples[(m.ns-1)%len(m.samples)]
	start, found := newest, false
	for i := 0; i < n; i++ {
		s := m.samples[i]
		if now.Sub(s.t) <= rateWindow && (!found || s.t.Before(start.t)) {
			start, found = s, true
		}
	}
	return start
}

// forTarget makes the meter's reports name a card ("" for none).
func (m *meter) forTarget(name string) *meter {
	m.target = name
	return m
}

// updateDecoded is update for a compressed count (done) with the decoded
// bytes written behind it.
func (m *meter) updateDecoded(done, decoded int64, force bool) {
	if m == nil || m.fn == nil {
		return
	}
	m.mu.Lock()
	m.decoded = decoded
	m.mu.Unlock()
	m.update(done, force)
}

// setCompressed says whether Done counts compressed bytes.
func (m *meter) setCompressed(c bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.compressed = c
}

// setTotal changes the total (a response announced the size); <0 is unknown.
func (m *meter) setTotal(total int64) {
	if m == nil {
		return
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	m.total = max(total, 0)
}

// keepAlive re-reports the last count every second until stop is called, so
// a stalled download shows its rate falling to zero instead of freezing on
// the last good figure while the idle timeout and retries run.
func (m *meter) keepAlive() (stop func()) {
	if m == nil || m.fn == nil {
		return func() {}
	}
	done := make(chan struct{})
	go func() {
		t := time.NewTicker(time.Second)
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-t.C:
				m.mu.Lock()
				n, idle := m.lastDone, m.now().Sub(m.last) >= time.Second/2
				m.mu.Unlock()
				if idle {
					m.update(n, false)
				}
			}
		}
	}()
	return func() { close(done) }
}

// StageBuild is reported (Done 0) while Image Factory builds an image it
// has not served before: the download's headers are late, not stalled.
const StageBuild Stage = "build"
