//go:build !race

package rabbitmq_test

const raceEnabled = false
