//go:build !linux

package wan

import "time"

// hrTimer is a high-resolution timer; there is none here, so the writers
// use time.Timer.
type hrTimer struct{}

func newHRTimer() *hrTimer { return nil }

func (h *hrTimer) sleep(d time.Duration) error { panic("wan: no high-resolution timer") }

func (h *hrTimer) close() {}
