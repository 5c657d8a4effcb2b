package cli

import (
	"fmt"
	"io"
	"net/url"
	"strings"
	"text/tabwriter"
	"time"

	caddycmd "github.com/caddyserver/caddy/v2/cmd"
	"github.com/spf13/cobra"

	"github.com/practicegw/practicegw/adapters/firmsystem"
	"github.com/practicegw/practicegw/adminapi"
	"github.com/practicegw/practicegw/store/connection"
)

func init() {
	caddycmd.RegisterCommand(caddycmd.Command{
		Name:  "sync",
		Usage: "status|resync ...",
		Short: "Shows and restarts the sync of a firm's real systems on a running gateway",
		Long: `
Live reads are served from a copy of each firm's real systems (its
practice-management system, ledger and document store) that the gateway keeps
in sync with the vendor. status shows how each role of the firm is served (the
Caddyfile's system, a connection and its status, demo records, or nothing), then
each system's sync: backfilling, live,
lagging or failing and why, how old the data is, the vendor calls of the last
hour against the vendor's budget, and how far a backfill has come. resync asks
a system's sync to compare every record with the vendor now. The command talks
to the running gateway's admin endpoint.

  practicegw sync status --firm frm_acme
  practicegw sync resync --firm frm_acme --system records
`,
		CobraFunc: func(cmd *cobra.Command) {
			cmd.AddCommand(syncStatusCommand(), resyncCommand())
		},
	})
}

func syncStatusCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "status --firm FIRM [--json]",
		Short: "Shows the sync of each of a firm's real systems",
		Args:  noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := requireFlags(cmd, "firm"); err != nil {
				return err
			}
			firm, _ := cmd.Flags().GetString("firm")
			asJSON, _ := cmd.Flags().GetBool("json")
			var list struct {
				Data  []adminapi.SyncView `json:"data"`
				Roles []adminapi.RoleView `json:"roles"`
			}
			if err := adminCall(cmd, "GET", "/practicegw/sync/"+url.PathEscape(firm), nil, &list); err != nil {
				return err
			}
			if asJSON {
				return printJSON(cmd.OutOrStdout(), list.Data)
			}
			if len(list.Roles) > 0 {
				if err := printRoles(cmd.OutOrStdout(), list.Roles, list.Data); err != nil {
					return err
				}
				if len(list.Data) == 0 {
					return nil
				}
				fmt.Fprintln(cmd.OutOrStdout())
			}
			if len(list.Data) == 0 {
				// Not "demo records": a role may be disconnected, waiting
				// for its first consent or never connected; the console's
				// Systems page and practicegw connect list say which.
				fmt.Fprintf(cmd.OutOrStdout(), "%s has no real system syncing: each role is on demo records, not connected, or waiting for its first consent (practicegw connect list --firm %s).\n", firm, firm)
				return nil
			}
			return printSyncs(cmd.OutOrStdout(), list.Data)
		},
	}
	cmd.Flags().String("firm", "", "the firm, such as frm_acme")
	cmd.Flags().Bool("json", false, "print as JSON")
	addAdminFlag(cmd)
	return cmd
}

// printRoles writes how each of the firm's roles is served, as its reads
// are: by the Caddyfile's system, a connection, the demo records, or
// nothing. A connection says one word that is true of it and of its data
// alike (syncs), never "connected" beside a failing sync.
func printRoles(w io.Writer, roles []adminapi.RoleView, syncs []adminapi.SyncView) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "ROLE\tSERVED BY")
	for _, r := range roles {
		var by string
		switch r.Source {
		case adminapi.SourceCaddyfile:
			by = fmt.Sprintf("%s, set in the Caddyfile", label(r.Role, r.System))
		case adminapi.SourceConnection:
			by = fmt.Sprintf("%s, connection %s (%s)", label(r.Role, r.System), r.Connection, standing(r, syncs))
			if r.Status != string(connection.Connected) {
				by += ": its copy is served, failing, until it is reconnected"
			}
		case adminapi.SourceDemo:
			by = "demo records (made up, not the firm's)"
		default:
			by = "not connected: /v1 refuses its reads until a system is connected"
			if r.Connection != "" {
				by += fmt.Sprintf(" (%s connection %s is %s)", label(r.Role, r.System), r.Connection, connection.Status(r.Status).Words())
			}
		}
		fmt.Fprintf(tw, "%s\t%s\n", r.Role, by)
	}
	return tw.Flush()
}

// standing is the one word for a role's connection: its status in words
// unless it is connected, and then the state of the data it serves (live,
// lagging, failing; copying while it backfills).
func standing(r adminapi.RoleView, syncs []adminapi.SyncView) string {
	if r.Status != string(connection.Connected) {
		return connection.Status(r.Status).Words()
	}
	for _, s := range syncs {
		if s.Role != r.Role || s.System != r.System {
			continue
		}
		if s.State == "backfilling" {
			return "connected, copying its records"
		}
		return "connected, " + s.State
	}
	return "connected"
}

// label is how people name the system registered as name in role
// ("Karbon"); its name when this build does not know it.
func label(role, name string) string {
	for _, m := range firmsystem.Modules() {
		if m.Role == role && m.Name == name {
			return m.Label
		}
	}
	return name
}

// printSyncs writes one line per system, then what needs saying about
// those that are backfilling, lagging or failing.
func printSyncs(w io.Writer, syncs []adminapi.SyncView) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "ROLE\tSYSTEM\tSTATE\tDATA AGE\tVENDOR CALLS (LAST HOUR)\tRECORDS")
	for _, s := range syncs {
		age := "-"
		if s.AgeSeconds != nil {
			age = (time.Duration(*s.AgeSeconds) * time.Second).String()
		}
		calls := fmt.Sprintf("%d", s.CallsLastHour)
		if s.BudgetPerHour > 0 {
			calls = fmt.Sprintf("%d of %d", s.CallsLastHour, s.BudgetPerHour)
		}
		var records []string
		for _, k := range s.Kinds {
			records = append(records, fmt.Sprintf("%s %d", k.Kind, k.Records))
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", s.Role, label(s.Role, s.System), s.State, age, calls, strings.Join(records, ", "))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	for _, s := range syncs {
		if s.Why != "" {
			fmt.Fprintf(w, "\n%s (%s) is %s. %s\n", s.Role, label(s.Role, s.System), s.State, s.Why)
		}
		if s.Progress != "" {
			fmt.Fprintf(w, "\n%s (%s) backfill: %s\n", s.Role, label(s.Role, s.System), s.Progress)
		}
		if s.Plan != "" {
			fmt.Fprintf(w, "\n%s (%s) %s\n", s.Role, label(s.Role, s.System), s.Plan)
		}
		if len(s.Unusable) > 0 {
			fmt.Fprintf(w, "\n%s (%s) cannot use the vendor's answer for %d records, served as last known and asked for again at each poll:\n",
				s.Role, label(s.Role, s.System), len(s.Unusable))
			for _, u := range s.Unusable {
				fmt.Fprintf(w, "  %s: %s\n", u.ID, u.Reason)
			}
		}
		if s.Links != nil && s.Links.Candidates > 0 {
			fmt.Fprintf(w, "\n%s (%s) clients: %s\n", s.Role, s.System, s.Links.Summary)
		}
		var reach []string
		for _, k := range s.Kinds {
			if k.Reaches != "" {
				reach = append(reach, fmt.Sprintf("%s %s", k.Kind, k.Reaches))
			}
		}
		if len(reach) > 0 {
			fmt.Fprintf(w, "%s (%s) changes reach the gateway: %s\n", s.Role, label(s.Role, s.System), strings.Join(reach, "; "))
		}
		if s.Notifications > 0 {
			fmt.Fprintf(w, "%s (%s) %d notifications became changes in the last hour: p50 %d ms, p99 %d ms from notification to event\n",
				s.Role, label(s.Role, s.System), s.Notifications, s.NotifiedP50Millis, s.NotifiedP99Millis)
		}
	}
	if len(syncs) > 0 && len(syncs[0].HeldBy) > 0 {
		fmt.Fprintf(w, "\nHeld in memory by %s\n", strings.Join(syncs[0].HeldBy, ", "))
	}
	return nil
}

func resyncCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "resync --firm FIRM --system SYSTEM",
		Short: "Asks a firm system's sync to compare every record with the vendor now",
		Args:  noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := requireFlags(cmd, "firm", "system"); err != nil {
				return err
			}
			firm, _ := cmd.Flags().GetString("firm")
			system, _ := cmd.Flags().GetString("system")
			var v adminapi.SyncView
			path := "/practicegw/sync/" + url.PathEscape(firm) + "/" + url.PathEscape(system) + "/resync"
			if err := adminCall(cmd, "POST", path, nil, &v); err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "Asked %s's %s (%s) to resync; the instance that runs its sync starts at its next step. It is %s now.\n",
				v.Firm, v.Role, label(v.Role, v.System), v.State)
			return nil
		},
	}
	cmd.Flags().String("firm", "", "the firm, such as frm_acme")
	cmd.Flags().String("system", "", "records, ledger or documents, or the vendor's name, such as karbon")
	addAdminFlag(cmd)
	return cmd
}
