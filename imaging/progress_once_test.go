package imaging

import (
	"testing"
	"time"
)

// A stage reports completion once, however slow the machine: a throttled
// report reaching the total is dropped in favour of the forced last one.
func TestMeterReportsCompletionOnce(t *testing.T) {
	var reps []Progress
	m := newMeter(func(p Progress) { reps = append(reps, p) }, StageVerify, 100, false)
	clock := time.Now()
	m.now = func() time.Time { return clock }
	m.update(0, true)
	clock = clock.Add(time.Second) // far past the interval: as under load
	m.update(50, false)
	clock = clock.Add(time.Second)
	m.update(100, false) // the last chunk's report
	m.update(100, true)  // the stage's end
	complete := 0
	for _, p := range reps {
		if p.Done == p.Total {
			complete++
		}
	}
	if complete != 1 || len(reps) != 3 {
		t.Fatalf("reports %+v: want 0, 50 and one complete", reps)
	}
}
