package cli

import (
	"fmt"
	"io"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/practicegw/practicegw/store/connection"
)

func stageMapCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "stage-map --firm FIRM (--system SYSTEM | --connection CONNECTION) [--set STATE=STAGE]... [--unmap STATE]... [--reset STATE]... [--json]",
		Short: "Shows or edits which of a records system's job states stands for each job stage",
		Long: `
Shows the stage map of a firm's connected records system (XPM's job states,
Karbon's work statuses): each of the vendor's states, read from it now, with the
stage it maps to and why (set by the firm's administrator, suggested by its
name, or taken from the status it is under), and the stages a job cannot be
moved to because no state maps to them. With --set, --unmap or --reset it
edits the map first: every gateway instance follows it within a second.

  practicegw connect stage-map --firm frm_hollis --system xpm
  practicegw connect stage-map --firm frm_hollis --system xpm --set "Partner sign-off=in_review"
  practicegw connect stage-map --firm frm_hollis --system xpm --unmap "On hold" --reset "Awaiting info"
`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := requireFlags(cmd, "firm"); err != nil {
				return err
			}
			f := cmd.Flags()
			firm, _ := f.GetString("firm")
			edit, err := stageMapEdit(cmd)
			if err != nil {
				return err
			}
			id, err := recordsConnection(cmd, firm)
			if err != nil {
				return err
			}
			var v connection.StageMapView
			if len(edit) == 0 {
				err = adminCall(cmd, "GET", connectionsPath(firm, id)+"/stage_map", nil, &v)
			} else {
				err = adminCall(cmd, "PATCH", connectionsPath(firm, id)+"/stage_map", map[string]any{"stage_map": edit}, &v)
			}
			if err != nil {
				return err
			}
			if asJSON, _ := f.GetBool("json"); asJSON {
				return printJSON(cmd.OutOrStdout(), v)
			}
			return printStageMap(cmd.OutOrStdout(), v)
		},
	}
	f := cmd.Flags()
	f.String("system", "", "the firm's connected records system, such as xpm or karbon")
	f.StringArray("set", nil, "map a state to a stage, as STATE=STAGE (repeat for more)")
	f.StringArray("unmap", nil, "map a state to no stage, though its name suggests one (repeat for more)")
	f.StringArray("reset", nil, "drop the firm's entry for a state: it maps to what its name suggests again (repeat for more)")
	f.Bool("json", false, "print as JSON")
	addConnectionFlags(cmd)
	return cmd
}

// stageMapEdit is the merge patch the flags ask for: a state to a stage,
// to "" (--unmap), or to null (--reset).
func stageMapEdit(cmd *cobra.Command) (map[string]*string, error) {
	f := cmd.Flags()
	sets, _ := f.GetStringArray("set")
	unmaps, _ := f.GetStringArray("unmap")
	resets, _ := f.GetStringArray("reset")
	edit := map[string]*string{}
	add := func(flag, state string, stage *string) error {
		state = strings.TrimSpace(state)
		if state == "" {
			return withUsage(cmd, fmt.Errorf("--%s names no state", flag))
		}
		if _, twice := edit[state]; twice {
			return withUsage(cmd, fmt.Errorf("the state %q is edited twice; name it once", state))
		}
		edit[state] = stage
		return nil
	}
	for _, s := range sets {
		state, stage, ok := strings.Cut(s, "=")
		if stage = strings.TrimSpace(stage); !ok || stage == "" {
			return nil, withUsage(cmd, fmt.Errorf("--set %q: give STATE=STAGE, such as \"In Review=in_review\"", s))
		}
		if err := add("set", state, &stage); err != nil {
			return nil, err
		}
	}
	for _, state := range unmaps {
		none := ""
		if err := add("unmap", state, &none); err != nil {
			return nil, err
		}
	}
	for _, state := range resets {
		if err := add("reset", state, nil); err != nil {
			return nil, err
		}
	}
	return edit, nil
}

// recordsConnection is --connection, or the firm's live connection of
// --system: the one a stage map belongs to.
func recordsConnection(cmd *cobra.Command, firm string) (string, error) {
	f := cmd.Flags()
	id, _ := f.GetString("connection")
	system, _ := f.GetString("system")
	switch {
	case id != "" && system != "":
		return "", withUsage(cmd, fmt.Errorf("give --system or --connection, not both"))
	case id != "":
		return id, nil
	case system == "":
		return "", withUsage(cmd, fmt.Errorf("--system or --connection is required: the records system whose stage map to show"))
	}
	var list struct {
		Data []connection.View `json:"data"`
	}
	if err := adminCall(cmd, "GET", connectionsPath(firm, ""), nil, &list); err != nil {
		return "", err
	}
	var others []string
	for _, v := range list.Data {
		if v.Role != "records" || v.Status == connection.Disconnected {
			continue
		}
		if v.System == system {
			return v.ID, nil
		}
		others = append(others, v.System)
	}
	if len(others) > 0 {
		return "", fmt.Errorf("--system %s: %s has no %s connection; its records system is %s", system, firm, system, strings.Join(others, ", "))
	}
	return "", fmt.Errorf("--system %s: %s has no records system connected: connect one with `practicegw connect --firm %s --role records --system %s`", system, firm, firm, system)
}

// printStageMap prints the states with their stages, then what no state
// maps to.
func printStageMap(w io.Writer, v connection.StageMapView) error {
	name := v.SystemName
	if name == "" {
		name = v.System
	}
	fmt.Fprintf(w, "The stage map of %s for %s (%s):\n\n", name, v.Firm, v.Connection)
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "STATE\tSTAGE\tWHY")
	for _, s := range v.States {
		state := s.State
		if s.Under != "" {
			state = s.Under + " - " + s.State
		}
		why := map[string]string{"set": "set by the firm", "suggested": "suggested by its name", "under": "its primary's"}[s.Source]
		if s.Stage == "" {
			why = "maps to no stage"
			if _, set := v.Set[s.State]; set {
				why = "unmapped by the firm"
			}
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\n", state, orDash(s.Stage), why)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if len(v.Unmapped) == 0 {
		fmt.Fprintln(w, "\nEvery stage has a state: a job can be moved to any.")
		return nil
	}
	fmt.Fprintf(w, "\nNo state maps to %s: a move there is refused until one does (--set STATE=STAGE).\n", strings.Join(v.Unmapped, ", "))
	return nil
}
