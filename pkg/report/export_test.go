package report

// EmitAll lets the external tests (schema_test.go, which validates through
// package report/schema and so cannot live inside package report) drive
// the same emitter sequence as the internal tests.
var EmitAll = emitAll
