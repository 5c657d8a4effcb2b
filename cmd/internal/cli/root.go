package cli

import (
	"cmp"
	"errors"
	"fmt"
	"io"
	"os"
	"reflect"
	"regexp"
	"runtime/debug"
	"slices"
	"strings"
	"time"

	"github.com/caddyserver/caddy/v2"
	caddycmd "github.com/caddyserver/caddy/v2/cmd"
	"github.com/spf13/cobra"
	"github.com/spf13/cobra/doc"
	"golang.org/x/mod/module"

	"github.com/practicegw/practicegw/internal/listen"
)

// Main is practicegw's command line: its own commands first, then the
// Caddy commands an operator needs, all under practicegw's name.
func Main() {
	// Before any command reads a Caddyfile: the Caddyfiles bind the API's
	// socket to PRACTICEGW_LISTEN's host through variables derived from it.
	if err := listen.Export(os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "practicegw:", err)
		os.Exit(1)
	}
	root := Root()
	root.SetArgs(os.Args[1:])
	if err := root.Execute(); err != nil {
		os.Exit(exitCode(err))
	}
}

// version is practicegw's version when the build sets it
// (-ldflags '-X github.com/practicegw/practicegw/cmd/internal/cli.version=v1.2.0');
// otherwise the build's module information gives it.
var version string

// ownCommands are practicegw's commands, in the order help lists them.
// They register with caddycmd like any plug-in so that Caddy's command
// table stays the one list of what the binary can do.
var ownCommands = []string{"credential", "connect", "sync", "listen", "trigger", "dispatcher"}

// withheld are Caddy's commands practicegw does not offer: upgrade,
// add-package and remove-package would replace the binary with a stock
// Caddy build from Caddy's download service, without practicegw's
// modules; version and manpage are practicegw's own below.
var withheld = []string{"upgrade", "add-package", "remove-package", "version", "manpage", "completion"}

const (
	ownGroup   = "practicegw"
	caddyGroup = "caddy"
)

// Root builds the command tree.
func Root() *cobra.Command {
	root := &cobra.Command{
		Use:   "practicegw",
		Short: "One API and signed webhooks in front of an accounting firm's systems",
		Long: `practicegw puts one versioned REST/JSON API (/v1), signed and retried
webhooks and a developer console in front of an accounting firm's own
systems, or seeded demo records. This build knows these systems:

` + knownSystems(false) + `

It is Caddy underneath, built with practicegw's modules and configured in a
Caddyfile. On a fresh clone:

  practicegw run                 the API and the console on http://localhost:8080,
                                 the admin endpoint on localhost:2019, state in ./data
  practicegw credential issue --firm frm_acme --name first --scopes clients:read,jobs:read
                                 a first credential for /v1

practicegw's own commands talk to a running gateway through its admin
endpoint (--admin, else PRACTICEGW_ADMIN, else localhost:2019); Caddy's
commands start, stop, reload and check the server. The README and
docs/CONTRACT.md say the rest.`,
		Example: `  practicegw run
  practicegw run --config config/karbon-xero-sharepoint.Caddyfile
  practicegw credential issue --firm frm_acme --name "Zapier sync" --scopes jobs:read,jobs:write
  practicegw listen --forward-to http://localhost:3000/hooks
  practicegw adapt --config Caddyfile`,
		// A command that fails after parsing its flags prints its error,
		// not its whole usage.
		SilenceUsage: true,
		Version:      versionText(),
	}
	root.SetVersionTemplate("{{.Version}}")
	root.AddGroup(
		&cobra.Group{ID: ownGroup, Title: "practicegw's commands:"},
		&cobra.Group{ID: caddyGroup, Title: "Running the server (Caddy's commands):"},
	)
	commands := caddycmd.Commands()
	for _, name := range ownCommands {
		if c, ok := commands[name]; ok {
			root.AddCommand(fromCaddy(c, ownGroup))
		}
	}
	names := make([]string, 0, len(commands))
	for name := range commands {
		if !slices.Contains(ownCommands, name) && !slices.Contains(withheld, name) {
			names = append(names, name)
		}
	}
	slices.Sort(names)
	for _, name := range names {
		root.AddCommand(fromCaddy(commands[name], caddyGroup))
	}
	root.AddCommand(versionCommand(), manpageCommand(root))
	root.SetHelpCommandGroupID(caddyGroup)
	root.SetCompletionCommandGroupID(caddyGroup)
	guard(root)
	checked(root)
	return root
}

// caddyInProse finds Caddy's help texts naming its binary in a command
// line ("caddy run", "$ caddy adapt"), which practicegw's binary answers
// instead; Caddy the server keeps its name.
var caddyInProse = regexp.MustCompile(`\bcaddy (run|start|stop|reload|adapt|validate|fmt|list-modules|environ|trust|untrust|storage|hash-password|file-server|reverse-proxy|respond|build-info|version)\b`)

// fromCaddy turns a registered command into a cobra command, as caddycmd
// does for its own root.
func fromCaddy(c caddycmd.Command, group string) *cobra.Command {
	cmd := &cobra.Command{
		Use:     strings.TrimSpace(c.Name + " " + c.Usage),
		Short:   c.Short,
		Long:    caddyInProse.ReplaceAllString(c.Long, "practicegw $1"),
		GroupID: group,
	}
	if c.CobraFunc != nil {
		c.CobraFunc(cmd)
	} else {
		cmd.RunE = caddycmd.WrapCommandFuncForCobra(c.Func)
		cmd.Flags().AddGoFlagSet(c.Flags)
	}
	return cmd
}

func versionCommand() *cobra.Command {
	return &cobra.Command{
		Use:     "version",
		Short:   "Prints practicegw's version and the Caddy version it is built on",
		Args:    noArgs,
		GroupID: caddyGroup,
		RunE: func(cmd *cobra.Command, _ []string) error {
			_, err := io.WriteString(cmd.OutOrStdout(), versionText())
			return err
		},
	}
}

// manpageCommand writes the manual pages of root's commands under
// practicegw's name.
func manpageCommand(root *cobra.Command) *cobra.Command {
	cmd := &cobra.Command{
		Use:     "manpage --directory <path>",
		Short:   "Generates the manual pages for practicegw's commands",
		Args:    noArgs,
		GroupID: caddyGroup,
		RunE: func(cmd *cobra.Command, _ []string) error {
			dir, _ := cmd.Flags().GetString("directory")
			if strings.TrimSpace(dir) == "" {
				return errors.New("--directory is required: the folder the manual pages are written to")
			}
			if err := os.MkdirAll(dir, 0o755); err != nil {
				return err
			}
			return doc.GenManTree(root, &doc.GenManHeader{Title: "practicegw", Section: "8"}, dir)
		},
	}
	cmd.Flags().StringP("directory", "o", "", "the folder the manual pages are written to")
	return cmd
}

// versionText is practicegw's version and Caddy's beside it, from the
// build's module information.
func versionText() string {
	info, _ := debug.ReadBuildInfo()
	return fmt.Sprintf("practicegw %s\nCaddy %s\n", buildVersion(version, info), caddyVersion())
}

// buildVersion is what a build says of itself: the version stamped with
// -ldflags, else the module's (go install ...@v1.2.0), else a development
// build of the commit the toolchain recorded (go build and go install in
// a git checkout record it, and whether the tree had uncommitted
// changes; go install ...@<commit> records it in the module's
// pseudo-version), then the toolchain.
func buildVersion(stamped string, info *debug.BuildInfo) string {
	if info == nil {
		return cmp.Or(stamped, "development build") + " (no build information)"
	}
	settings := map[string]string{}
	for _, s := range info.Settings {
		settings[s.Key] = s.Value
	}
	v, rev, at := stamped, settings["vcs.revision"], settings["vcs.time"]
	if mv := info.Main.Version; module.IsPseudoVersion(mv) {
		if rev == "" {
			rev, _ = module.PseudoVersionRev(mv)
		}
		if t, err := module.PseudoVersionTime(mv); err == nil && at == "" {
			at = t.UTC().Format(time.RFC3339)
		}
	} else if v == "" && mv != "" && mv != "(devel)" {
		v = mv
	}
	var detail []string
	switch {
	case rev != "":
		d := "commit " + rev[:min(12, len(rev))]
		if at != "" {
			d += " of " + at
		}
		switch settings["vcs.modified"] {
		case "true":
			d += ", with uncommitted changes"
		case "false":
			d += ", as committed"
		}
		detail = append(detail, d)
	case v == "":
		return "development build (" + info.GoVersion + "; no commit recorded: built outside a git checkout, or with -buildvcs=false)"
	}
	detail = append(detail, info.GoVersion)
	return cmp.Or(v, "development build") + " (" + strings.Join(detail, ", ") + ")"
}

// caddyVersion is the Caddy module's version as Caddy reports it, else as
// the build's dependencies list it (a test binary gives Caddy no main
// module to read it from).
func caddyVersion() string {
	if v, _ := caddy.Version(); v != "unknown" {
		return v
	}
	if info, ok := debug.ReadBuildInfo(); ok {
		for _, dep := range info.Deps {
			if dep.Path == "github.com/caddyserver/caddy/v2" {
				return dep.Version
			}
		}
	}
	return "unknown"
}

// exitCode is the process's exit status for a command's error: Caddy's
// commands return theirs in an error of caddycmd's own (unexported) type,
// whose ExitCode field is read here so that `practicegw stop` and the
// rest exit as `caddy` would.
func exitCode(err error) int {
	for e := err; e != nil; e = errors.Unwrap(e) {
		v := reflect.ValueOf(e)
		if v.Kind() == reflect.Pointer && !v.IsNil() && v.Elem().Kind() == reflect.Struct {
			if f := v.Elem().FieldByName("ExitCode"); f.IsValid() && f.CanInt() {
				return int(f.Int())
			}
		}
	}
	return 1
}
