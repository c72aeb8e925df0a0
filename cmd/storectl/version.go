package main

import (
	"fmt"
	"runtime"

	"github.com/spf13/cobra"

	"github.com/storectl/storectl/pkg/report"
)

func newVersionCmd(env *Env) *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "Print the tool version, report schema version and Go version",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			f, err := env.outputFormat()
			if err != nil {
				return err
			}
			if f == report.Text {
				_, err := fmt.Fprintf(env.Streams.Out, "storectl %s (schema %s, %s)\n", version, report.Schema, runtime.Version())
				return err
			}
			s, err := env.startSession(report.Run{Command: "version"})
			if err != nil {
				return err
			}
			s.extra = map[string]any{"version": version, "schema": report.Schema, "go": runtime.Version()}
			return s.finish(exitOK)
		},
	}
}
