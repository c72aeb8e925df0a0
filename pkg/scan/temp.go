package scan

import "os"

// UnlinkedTemp creates a temp file (os.CreateTemp with pattern) and
// removes its name at once, so it vanishes with its last descriptor
// whatever happens to the process. Scans spill what would otherwise grow
// with the store (RocketMQ verify's record table, RabbitMQ's long victim
// lists) to such files.
func UnlinkedTemp(pattern string) (*os.File, error) {
	f, err := os.CreateTemp("", pattern)
	if err != nil {
		return nil, err
	}
	if err := os.Remove(f.Name()); err != nil {
		f.Close()
		return nil, err
	}
	return f, nil
}
