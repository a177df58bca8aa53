//go:build race

package wan

const raceEnabled = true
