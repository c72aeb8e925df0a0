//go:build race

package rabbitmq_test

// raceEnabled: the race detector's sync.Pool drops a random share of what
// is put back (to find misuse), so tests of what a pool saves skip.
const raceEnabled = true
