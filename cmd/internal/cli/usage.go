package cli

import (
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

// A command line answers a mistyped command, flag or argument as gh and
// stripe do: an error (exit status 1) that names what was typed, the
// nearest command or flag there is, and where the usage is; never the
// help text with status 0, which a script would take for success.

// guard makes every command under root answer mistakes so: a group of
// subcommands (credential, sync) refuses one it does not have, with the
// nearest it has, rather than printing its help; an unknown flag names
// the nearest flag; a refused argument says where the usage is.
func guard(root *cobra.Command) {
	root.SetFlagErrorFunc(flagError)
	var walk func(*cobra.Command)
	walk = func(c *cobra.Command) {
		c.SuggestionsMinimumDistance = 2
		if c.HasParent() && c.HasSubCommands() && !c.Runnable() {
			// A group has no flags of its own: it reads its arguments
			// itself, so that a mistyped subcommand's flags do not hide it.
			c.DisableFlagParsing = true
			c.DisableFlagsInUseLine = true
			c.RunE = group
		}
		if check := c.Args; c.HasParent() && check != nil {
			c.Args = func(cmd *cobra.Command, args []string) error {
				err := check(cmd, args)
				switch {
				case err == nil:
					return nil
				case cmd.HasSubCommands() && len(args) > 0:
					return unknownCommand(cmd, args[0])
				}
				return withUsage(cmd, err)
			}
		}
		for _, sub := range c.Commands() {
			walk(sub)
		}
	}
	walk(root)
}

// group answers a group of subcommands given none it has: its help when
// given nothing (or asked for it), else what was mistyped.
func group(cmd *cobra.Command, args []string) error {
	for _, a := range args {
		switch {
		case a == "-h" || a == "--help":
			return cmd.Help()
		case !strings.HasPrefix(a, "-"):
			return unknownCommand(cmd, a)
		}
		name, _, _ := strings.Cut(strings.TrimLeft(a, "-"), "=")
		return flagError(cmd, fmt.Errorf("unknown flag: --%s", name))
	}
	return cmd.Help()
}

// unknownCommand is a subcommand of cmd that is not there.
func unknownCommand(cmd *cobra.Command, name string) error {
	msg := fmt.Sprintf("unknown command %q for %q", name, cmd.CommandPath())
	if s := cmd.SuggestionsFor(name); len(s) > 0 {
		msg += "\n\nDid you mean this?\n\t" + strings.Join(s, "\n\t")
	}
	return withUsage(cmd, errors.New(msg))
}

// flagError is pflag's refusal of a flag, with the nearest flag the
// command has to one it does not.
func flagError(cmd *cobra.Command, err error) error {
	msg := err.Error()
	if name, ok := strings.CutPrefix(msg, "unknown flag: --"); ok {
		msg = fmt.Sprintf("unknown flag --%s for %q", name, cmd.CommandPath())
		if s := nearestFlags(cmd, name); len(s) > 0 {
			msg += "\n\nDid you mean this?\n\t--" + strings.Join(s, "\n\t--")
		}
	}
	return withUsage(cmd, errors.New(msg))
}

// withUsage ends err with where cmd's usage is.
func withUsage(cmd *cobra.Command, err error) error {
	return fmt.Errorf("%w\n\nRun '%s --help' for usage.", err, cmd.CommandPath())
}

// noArgs refuses arguments to a command that takes flags only.
func noArgs(cmd *cobra.Command, args []string) error {
	if len(args) > 0 {
		return fmt.Errorf("%s takes no arguments, only flags: %q is not one", cmd.CommandPath(), args[0])
	}
	return nil
}

// oneArg is a command's one argument, what says what it is when it is
// missing (or when there are more).
func oneArg(what string) cobra.PositionalArgs {
	return func(cmd *cobra.Command, args []string) error {
		switch {
		case len(args) == 0:
			return fmt.Errorf("%s needs %s", cmd.CommandPath(), what)
		case len(args) > 1:
			return fmt.Errorf("%s takes one argument, %s; %q is one too many", cmd.CommandPath(), what, args[1])
		}
		return nil
	}
}

// requireFlags says which of the named flags were left out or empty, each
// with what it takes.
func requireFlags(cmd *cobra.Command, names ...string) error {
	var missing []*pflag.Flag
	for _, n := range names {
		if f := cmd.Flags().Lookup(n); f != nil && f.Value.String() == "" {
			missing = append(missing, f)
		}
	}
	switch len(missing) {
	case 0:
		return nil
	case 1:
		return withUsage(cmd, fmt.Errorf("--%s is required: %s", missing[0].Name, missing[0].Usage))
	}
	flags := make([]string, len(missing))
	for i, f := range missing {
		flags[i] = "--" + f.Name
	}
	return withUsage(cmd, fmt.Errorf("%s and %s are required", strings.Join(flags[:len(flags)-1], ", "), flags[len(flags)-1]))
}

// nearestFlags are cmd's flags whose names are within two edits of name,
// or start with it.
func nearestFlags(cmd *cobra.Command, name string) []string {
	var out []string
	cmd.Flags().VisitAll(func(f *pflag.Flag) {
		if f.Hidden {
			return
		}
		if editDistance(strings.ToLower(name), f.Name) <= 2 || strings.HasPrefix(f.Name, strings.ToLower(name)) {
			out = append(out, f.Name)
		}
	})
	slices.Sort(out)
	return out
}

// editDistance is the Levenshtein distance between a and b.
func editDistance(a, b string) int {
	prev := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur := make([]int, len(b)+1)
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev = cur
	}
	return prev[len(b)]
}
