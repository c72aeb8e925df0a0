package report

import "strings"

// UndoCommand is the exact command that puts back an apply whose
// pre-images are in backupDir.
func UndoCommand(backupDir string) string {
	return "storectl undo " + ShellQuote(backupDir) + " --apply"
}

// ShellQuote quotes s for a POSIX shell when it needs it, so that a
// command printed for an operator can be pasted as it is. The quoted form
// is escaped (Escape) for the terminal: a name with control bytes gets
// their escapes, never the bytes.
func ShellQuote(s string) string {
	if s != "" && strings.Trim(s, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789@%+=:,./_-") == "" {
		return s
	}
	return Escape("'" + strings.ReplaceAll(s, "'", `'\''`) + "'")
}
