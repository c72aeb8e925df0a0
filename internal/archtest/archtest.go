// Package archtest holds the tests that keep the repository's shape
// (docs/architecture.md): the import floors cmd → report/repair/salvage →
// scan → format, pure decoders under pkg/format (no files, directories,
// goroutines or locks) and comment references to docs/ that resolve
// inside the repository. It has no code of its own.
package archtest
