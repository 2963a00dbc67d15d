package main

import (
	"encoding/json"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/cepcluster/cep/internal/version"
)

func newVersionCmd(d *deps) *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "Print cepctl's version",
		Long: `Print the version of this cepctl build: the release it was built as
(go build -ldflags "-X github.com/cepcluster/cep/internal/version.Version=v1.2.3",
make build), else the module version and VCS revision the Go toolchain
recorded. cepctl status shows the nodes.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			v := version.Get()
			switch d.flags.output {
			case "json", "yaml":
				js, err := json.Marshal(struct {
					Version   string `json:"version"`
					Revision  string `json:"revision"`
					Modified  bool   `json:"modified"`
					GoVersion string `json:"goVersion"`
				}{v.Version, v.Revision, v.Modified, v.GoVersion})
				if err != nil {
					return err
				}
				return writeStructured(d.stdout, d.flags.output, js)
			case "table":
				_, err := fmt.Fprintln(d.stdout, "cepctl", v.String())
				return err
			}
			return fmt.Errorf("unknown output format %q: use table, json or yaml", d.flags.output)
		},
	}
}
